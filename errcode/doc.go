// Package errcode is the error vocabulary of idn's HTTP APIs: every stable
// code that the gateway (runtime, admin and MCP routes) and the control plane
// answer with, its HTTP status and its default message, in one table.
//
// Every error answer is the JSON envelope
//
//	{"error": "<message>", "code": "<CODE>", "request_id": "...", "timestamp": "...",
//	 "docs_url": "https://github.com/idnhq/idn/blob/main/docs/errors.md#<CODE>"}
//
// (docs_url is Code.DocsURL: the code's row in docs/errors.md), sometimes
// with "details" and, for answers that clear by themselves, a
// Retry-After header. Clients branch on "code"; the message is for people.
//
// A Code is one of the constants of this package, so a misspelt code does
// not compile. Errors that carry a code implement Error (a Code method);
// Of finds the code anywhere in an error chain, and New makes an error
// that carries one, for a program's own hook (such as mcpproxy's Caller) to
// refuse with. Storage and library packages return plain sentinels; codes
// are given where errors become answers (the admin API, the proxy, the
// control plane's error table). A program embedding proxy.Handler or
// controlplane.Server can branch on the codes of their errors:
//
//	if code, ok := errcode.Of(err); ok && code == errcode.AuthClaimRequired { ... }
//
// A client reads an answer's code with Parse, or by decoding "code" into a
// Code, and compares Codes, never strings. Parse also reads the names that
// codes had before they were renamed (docs/errors.md lists them), so a
// client understands a server older than itself.
//
// One failure has one code, and so one status, on every server. A code
// for a thing that is invalid, not found or forbidden names the thing first:
// NAMESPACE_INVALID, SERVICE_NOT_FOUND, ORIGIN_FORBIDDEN (INVALID_DID
// keeps the name its clients know). A *_RATE_LIMITED code (429, with
// Retry-After) refuses a rate over time; a *_LIMIT_REACHED code refuses
// past a cap on things held at once (409 when only a deletion frees a
// place, 429 when time will).
//
// # Codes
//
// Code, HTTP status and default message. Answers often carry a more
// specific message than the default.
//
// Every API:
//
//	INTERNAL_ERROR                   500  internal error
//	VALIDATION_ERROR                 400  invalid request
//	NOT_FOUND                        404  not found
//	METHOD_NOT_ALLOWED               405  method not allowed
//	NOT_ACCEPTABLE                   406  no acceptable media type
//	UNSUPPORTED_MEDIA_TYPE           415  Content-Type must be application/json
//	REQUEST_BODY_TOO_LARGE           413  request body is too large
//	REQUEST_BODY_CAPACITY_EXHAUSTED  503  the server is holding as many request bodies as it may; try again shortly
//	REQUEST_TARGET_FOREIGN           400  the absolute-form request target names another server; send the path only
//	ADMIN_UNAUTHORIZED               401  this route needs credentials: the admin bearer token, or a live idn_session
//	ORIGIN_FORBIDDEN                 403  request origin is not allowed
//	ADMIN_FORBIDDEN                  403  admin access refused
//
// Signed requests, on both servers (the gateway's runtime routes and signed
// admin checks, the control plane's signed routes): the same failure has
// the same code and status on either.
//
//	AUTH_HEADERS_INVALID             403  signed headers are missing, duplicated or malformed
//	AUTH_SIGNATURE_INVALID           403  request signature verification failed
//	AUTH_SIGNED_COMPONENTS_INVALID   403  signed components do not match the idn-rfc9421-v1 profile
//	AUTH_IDENTITY_INVALID            403  identity headers or agent certificate are missing or invalid
//	AUTH_NONCE_INVALID               403  signature nonce is missing or malformed
//	AUTH_REPLAY_DETECTED             403  nonce already used; retry with a new nonce
//	AUTH_FORBIDDEN                   403  request refused
//	NONCE_STORE_FULL                 503  the server is at its replay-protection capacity; try again shortly
//	NONCE_STORE_UNAVAILABLE          503  the server cannot record nonces right now; try again shortly
//
// Gateway, claims:
//
//	AUTH_CLAIMS_UNAVAILABLE          503  approved claims are not available; try again shortly
//	AUTH_CLAIMS_LOOKUP_FAILED        500  approved-claims lookup failed
//	AUTH_CLAIM_REQUIRED              403  this agent is not approved for this service; the namespace owner must approve the claim
//	AUTH_CLAIM_REVOKED               403  the namespace owner revoked this agent's claim for this service; only the owner can approve it again
//	AUTH_CLAIM_REJECTED              403  the namespace owner rejected this agent's claim for this service; only the owner can approve it
//	AUTH_CLAIM_SUBMIT_RATE_LIMITED   429  too many claims submitted for this namespace; try again later
//	AUTH_CLAIM_SUBMIT_FAILED         502  the gateway could not file this agent's claim with the control plane, so there is no claim to approve; the gateway's log has the cause under this request id
//	AUTH_ACTION_APPROVAL_REQUIRED    403  this call needs the namespace owner's approval; the gateway filed an action request (action_id) that the owner approves with a passkey before expires_at
//	AUTH_ACTION_DENIED               403  the namespace owner denied this call
//	AUTH_ACTION_SUBMIT_FAILED        502  the gateway could not file the action request with the control plane, so there is nothing to approve; the gateway's log has the cause under this request id
//
// Gateway, connections and upstreams:
//
//	CONNECTION_NOT_FOUND             404  connection not found
//	CONNECTION_DISABLED              403  the connection is disabled
//	CONNECTION_PROTOCOL_MISMATCH     400  the connection does not serve this protocol
//	CONNECTION_EXISTS                409  a connection with this id already exists
//	ROTATION_REQUIRED                403  the connection's credential is overdue for rotation
//	CREDENTIAL_UNRESOLVED            500  the connection's stored credential cannot be resolved
//	CONNECTION_MISCONFIGURED         500  the connection is misconfigured on the gateway
//	VARIABLE_NOT_FOUND               404  credential variable not found
//	VARIABLE_IN_USE                  409  the credential variable is still referenced by a connection
//	UPSTREAM_ERROR                   502  the upstream could not be reached or failed
//	UPSTREAM_TIMEOUT                 504  the upstream did not answer in time
//	UPSTREAM_AUTH_UNAVAILABLE        503  no access token from the connection's OAuth provider; try again after retry_after_seconds
//	UPSTREAM_AUTH_REQUIRED           403  no OAuth account connected for this subject; the owner must connect one
//
// Gateway, admin API (PLAINTEXT_SECRET_REFUSED reaches the owner over the
// pairing relay, as the data of a JSON-RPC error, not as an HTTP answer):
//
//	ADMIN_TOKEN_REQUIRED             401  changing where or how a stored secret is sent needs the admin token
//	DISCOVERY_UNAVAILABLE            501  MCP discovery is not available in this gateway
//	PLAINTEXT_SECRET_REFUSED         400  a secret sent in clear over the pairing relay is refused; seal it to the gateway's HPKE key
//	SERVICE_API_KEY_MISSING          409  the gateway has no service API key for this connection's service and is not paired, so it could neither read nor file its claims
//
// Gateway, MCP routes:
//
//	MCP_TOOL_NOT_FOUND               404  tool not found
//	MCP_TOOL_FORBIDDEN               403  tool not allowed for this subject
//	MCP_TOOL_CHANGED                 403  the tool's definition changed since it was approved; it waits for review
//	MCP_TOOL_ARGUMENTS_INVALID       400  invalid tool arguments
//	MCP_TOOL_RATE_LIMITED            429  tool-call rate limit exceeded
//	MCP_CIRCUIT_OPEN                 503  the upstream MCP server keeps failing; calls resume after a cooldown
//	MCP_SESSION_NOT_FOUND            404  no such MCP session
//	MCP_SESSIONS_EXHAUSTED           503  too many MCP sessions are open; try again shortly
//	MCP_SESSION_MISDIRECTED          421  this MCP session belongs to another gateway replica; route requests by Mcp-Session-Id to the replica that opened it
//	MCP_HEADER_MISMATCH              400  the Mcp-Method or Mcp-Name header does not match the message
//
// Control plane:
//
//	RATE_LIMITED                     429  too many attempts; retry later
//	API_KEY_INVALID                  401  missing or invalid service api key
//	API_KEY_NOT_FOUND                404  api key not found
//	API_KEY_LIMIT_REACHED            409  the service already has the maximum number of active api keys
//	SERVICE_LIMIT_REACHED            409  the namespace already has the maximum number of services
//	SERVICE_NOT_FOUND                404  service not found
//	SERVICE_MISMATCH                 403  service differs from the api key's service
//	FEED_CURSOR_EXPIRED              410  the feed no longer holds the changes since this cursor; read the whole feed again
//	SLUG_TAKEN                       409  service slug is already taken
//	NAMESPACE_NOT_FOUND              404  namespace not found
//	NAMESPACE_DEACTIVATED            403  namespace is deactivated
//	NAMESPACE_TAKEN                  409  namespace is not available
//	NAMESPACE_FORBIDDEN              403  not authorized for this namespace
//	NAMESPACE_INVALID                400  invalid namespace format
//	INVALID_DID                      400  malformed DID
//	DID_NOT_FOUND                    404  DID not found
//	CLAIM_NOT_FOUND                  404  claim not found
//	CLAIM_STATE_CONFLICT             409  transition not allowed
//	PENDING_LIMIT_REACHED            429  the namespace has too many pending claims for this service
//	AGENT_PENDING_LIMIT_REACHED      429  this agent address has too many pending claims for the namespace and service
//	DATABASE_UNAVAILABLE             503  database unavailable
//	DATABASE_BUSY                    503  the database is busy with other writes; retry after Retry-After seconds
//	REGISTRY_WRITE_FAILED            502  the registry write failed; the claim is unchanged
//	CREDENTIAL_INVALID               400  credential is not a valid PublicKeyCredential JSON
//	CHALLENGE_INVALID                401  unknown or already used challenge for this ceremony
//	CHALLENGE_EXPIRED                401  challenge expired: request new options
//	WEBAUTHN_FAILED                  401  passkey verification failed
//	PASSKEY_COUNTER_REGRESSION       401  signature counter did not increase: the authenticator may be cloned
//	PASSKEY_EXISTS                   409  this passkey is already registered
//	PASSKEY_NOT_FOUND                404  passkey not found
//	LAST_PASSKEY                     409  the last passkey of an account cannot be deleted
//	NO_PASSKEYS                      409  the namespace has no passkey to sign in with
//	REAUTH_REQUIRED                  403  verify with an established passkey again (GET /v1/auth/verify/options, POST /v1/auth/verify) within 5 minutes before this action
//	SESSION_NOT_FOUND                404  session not found
//	SESSION_LIMIT_REACHED            429  the namespace has the maximum number of live sessions; end one, or retry when the oldest expires
//	SIGNIN_LINK_INVALID              401  this sign-in link is unknown, already used or expired; create a new one
//	WEBHOOKS_DISABLED                503  webhooks are not configured on this control plane
//	WEBHOOK_NOT_FOUND                404  webhook not found
//	WEBHOOK_LIMIT_REACHED            409  the service already has the maximum number of webhooks
//	WEBHOOK_URL_FORBIDDEN            400  webhook url points to a private or special-use address
//
// Control plane, gateway pairing:
//
//	GATEWAY_NOT_FOUND                404  gateway not found
//	GATEWAY_NOT_PAIRED               403  this gateway key is not paired; pair it again from the dashboard
//	GATEWAY_OFFLINE                  409  the gateway is not connected
//	GATEWAY_TIMEOUT                  504  the gateway did not answer in time
//	GATEWAY_RPC_LIMIT_REACHED        429  too many RPCs are waiting for this owner or gateway; retry when one has been answered
//	PAIRING_CODE_INVALID             401  unknown pairing session or wrong pairing code
//	PAIRING_EXPIRED                  410  the pairing session expired; start a new one
//	PAIRING_ENDED                    410  the pairing session was used or ended after too many wrong codes; start a new one
//	PAIRING_LIMIT_REACHED            429  the namespace has the maximum number of open pairing sessions; retry when one is used or expires
//	GATEWAY_LIMIT_REACHED            409  the namespace already has the maximum number of paired gateways; unpair one first
//	ACTION_NOT_FOUND                 404  action request not found
//	ACTION_STATE_CONFLICT            409  the action request is no longer pending (decided or expired)
package errcode
