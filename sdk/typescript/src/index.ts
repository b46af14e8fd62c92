/**
 * @idnhq/idn — sign HTTP and MCP requests as an idn agent under the
 * idn-rfc9421-v1 profile (RFC 9421, Ed25519).
 *
 * - Identity: create, load and save identities in the idn CLI's format
 *   ($IDN_HOME/identities/<namespace>/identity.json), sign requests.
 * - idnFetch: a fetch that signs every request; pass it to the MCP SDK's
 *   StreamableHTTPClientTransport as its `fetch` option.
 * - IdnError, readError, throwIfError: the servers' error envelope, typed.
 * - waitForApproval: retry while the owner has not approved the claim.
 * - verifyRequest, withIdnAgent: accept idn agents in a service directly.
 */
export { Identity, PROFILE, certificateCanonicalText, encodeCertificateHeader, verifyCertificate, did, home } from "./identity.js";
export type { Certificate, CreateOptions, ExternalSigner, HomeOptions, RequestToSign, SignOptions, SignedHeaders } from "./identity.js";
export { idnFetch } from "./fetch.js";
export type { FetchLike, FetchOptions, RetryOptions } from "./fetch.js";
export { IdnError, readError, throwIfError, waitForApproval, parseRetryAfter, CLAIM_REQUIRED, ACTION_APPROVAL_REQUIRED, MARK_HEADER } from "./errors.js";
export type { WaitOptions } from "./errors.js";
export { validateName, validateNamespace, validateNonce, validateSubject } from "./rules.js";
export { encodeSubject, decodeSubject } from "./encoding.js";
export { useCryptoBackend, cryptoBackend } from "./crypto.js";
export type { CryptoBackendName } from "./crypto.js";
export { verifyRequest, withIdnAgent, idnAgentMiddleware, controlPlaneClaims, MemoryNonceStore, VerifyError } from "./verify.js";
export type { ClaimCheckOptions, ClaimDecision, MiddlewareOptions, NodeRequest, NodeResponse, NonceStore, ReceivedRequest, VerifiedAgent, VerifyCode, VerifyOptions } from "./verify.js";
