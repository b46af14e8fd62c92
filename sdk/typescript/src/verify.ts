// Verifying idn agents' requests in a service, without a gateway: the
// profile checks of the Go identity.Verifier (docs/profile.md), a nonce
// store, and a Fetch-API middleware.

import { backend } from "./crypto.js";
import { decodeSubject, fromBase64, toBase64, utf8, utf8Decoder } from "./encoding.js";
import { MARK_HEADER } from "./errors.js";
import { idnFetch, type FetchLike } from "./fetch.js";
import { verifyCertificate, type Certificate, type Identity } from "./identity.js";
import { validateNamespace, validateNonce, validateSubject } from "./rules.js";
import { isInnerList, parseDictionary, serializeBare, serializeParams, SfError, type InnerList } from "./sfv.js";

/** A request as a verifier sees it. */
export interface ReceivedRequest {
  method: string;
  /** The absolute URL the client addressed (scheme, host and the raw path and query as received). */
  url: string | URL;
  headers: Headers | Record<string, string | string[] | undefined>;
  /** The body as received; empty or absent for none. */
  body?: Uint8Array | string | null;
}

/**
 * Remembers nonces: check records (namespace, nonce) until `until` and
 * returns true, or returns false when it is already recorded (a replay).
 * A store shared by every instance of a service stops replays across them.
 */
export interface NonceStore {
  check(namespace: string, nonce: string, until: Date): boolean | Promise<boolean>;
}

/** Options of verifyRequest. nonces is required: no store, no verification. */
export interface VerifyOptions {
  nonces: NonceStore;
  /** The clock, in milliseconds (default Date.now). */
  now?: () => number;
  /** How old a signature may be (default 300 s). */
  maxAgeSeconds?: number;
  /** How far in the future its created may be (default 30 s). */
  futureSkewSeconds?: number;
}

/** The agent whose request verified. */
export interface VerifiedAgent {
  namespace: string;
  /** The decoded idn-subject. */
  subject: string;
  /** The certificate's display name, undefined for none. */
  name: string | undefined;
  keyId: string;
  /** "ed25519:<base64>". */
  publicKey: string;
  /** "ed25519-<16 hex>", as owners see the key. */
  fingerprint: string;
  nonce: string;
  created: Date;
}

/** The codes a refusal carries, as the gateway answers them. */
export type VerifyCode =
  | "AUTH_HEADERS_INVALID"
  | "AUTH_SIGNATURE_INVALID"
  | "AUTH_SIGNED_COMPONENTS_INVALID"
  | "AUTH_IDENTITY_INVALID"
  | "AUTH_NONCE_INVALID"
  | "AUTH_REPLAY_DETECTED";

/** A refused request: code says why, as the gateway would say it (403). */
export class VerifyError extends Error {
  readonly status = 403;
  constructor(readonly code: VerifyCode, message: string) {
    super(`${code}: ${message}`);
    this.name = "VerifyError";
  }
}

const IDENTITY_HEADERS = ["idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert"] as const;
const NO_BODY = ["@method", "@target-uri", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert"];
const WITH_BODY = ["@method", "@target-uri", "content-digest", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert"];
/** MCP's routing headers, which a signature with a body may cover last: mcp-method, then mcp-name. */
const MCP_ROUTING = ["mcp-method", "mcp-name"];
const fail = (code: VerifyCode, message: string) => new VerifyError(code, message);

/** Field lines of a header: one entry per line received. */
function lines(h: ReceivedRequest["headers"], name: string): string[] {
  if (h instanceof Headers) {
    const v = h.get(name);
    return v === null ? [] : [v];
  }
  for (const [k, v] of Object.entries(h)) {
    if (k.toLowerCase() !== name || v === undefined) continue;
    return Array.isArray(v) ? v : [v];
  }
  return [];
}

function one(h: ReceivedRequest["headers"], name: string, missing: VerifyCode): string {
  const l = lines(h, name);
  if (l.length === 0) throw fail(missing, `missing ${name}`);
  if (l.length > 1) throw fail("AUTH_HEADERS_INVALID", `duplicate ${name}`);
  return l[0]!.trim();
}

/**
 * Verifies an idn agent's request under the profile: exactly the profile's
 * covered components, created within the window, the identity headers
 * against the certificate and its proof, the Ed25519 signature (over the
 * lower-cased or the as-sent method), the body against content-digest, and
 * the nonce (recorded in options.nonces). Returns the agent or throws a
 * VerifyError. Approval (the control plane's claims) is the caller's.
 */
export async function verifyRequest(req: ReceivedRequest, options: VerifyOptions): Promise<VerifiedAgent> {
  if (!options?.nonces) throw fail("AUTH_NONCE_INVALID", "no nonce store configured");
  const [ns, subjectHeader, keyHeader, certHeader] = IDENTITY_HEADERS.map((n) => one(req.headers, n, "AUTH_IDENTITY_INVALID")) as [string, string, string, string];
  const inputLine = one(req.headers, "signature-input", "AUTH_HEADERS_INVALID");
  const sigLine = one(req.headers, "signature", "AUTH_HEADERS_INVALID");
  const digestLines = lines(req.headers, "content-digest");
  if (digestLines.length > 1) throw fail("AUTH_HEADERS_INVALID", "duplicate content-digest");
  try {
    validateNamespace(ns);
  } catch {
    throw fail("AUTH_IDENTITY_INVALID", "bad idn-namespace");
  }
  let subject: string;
  try {
    subject = decodeSubject(subjectHeader);
    validateSubject(subject);
  } catch {
    throw fail("AUTH_IDENTITY_INVALID", "bad idn-subject");
  }
  const body = typeof req.body === "string" ? utf8.encode(req.body) : (req.body ?? new Uint8Array());

  // The one signature.
  let inputs, sigs;
  try {
    inputs = parseDictionary(inputLine);
    sigs = parseDictionary(sigLine);
  } catch (e) {
    if (e instanceof SfError) throw fail("AUTH_HEADERS_INVALID", "signature headers are not structured dictionaries");
    throw e;
  }
  if (inputs.size !== 1 || sigs.size !== 1) throw fail("AUTH_HEADERS_INVALID", "more than one signature");
  const [label, list] = [...inputs][0]!;
  const sigMember = sigs.get(label);
  if (!isInnerList(list)) throw fail("AUTH_HEADERS_INVALID", "signature-input member is not an inner list");
  if (!sigMember || isInnerList(sigMember) || !(sigMember.value instanceof Uint8Array)) throw fail("AUTH_HEADERS_INVALID", "signature member is not a byte sequence");
  const signature = sigMember.value;

  const components = list.items.map((it) => it.value);
  if (list.items.some((it) => typeof it.value !== "string" || it.params.length > 0)) throw fail("AUTH_SIGNED_COMPONENTS_INVALID", "components must be plain names");
  const want = body.length > 0 ? WITH_BODY : NO_BODY;
  // A body's signature may end with MCP's routing headers (see MCP_ROUTING).
  let routed = 0;
  if (body.length > 0) for (let n = MCP_ROUTING.length; n > 0 && routed === 0; n--) if (components.slice(-n).join(" ") === MCP_ROUTING.slice(0, n).join(" ") && components.length > n) routed = n;
  const base = components.slice(0, components.length - routed);
  if (base.length !== want.length || new Set(base).size !== want.length || !want.every((c) => base.includes(c))) {
    throw fail("AUTH_SIGNED_COMPONENTS_INVALID", `covered components are not the profile's set for a request ${body.length > 0 ? "with" : "without"} a body`);
  }
  const params = new Map(list.params);
  const created = params.get("created");
  const expires = params.get("expires");
  const keyid = params.get("keyid");
  const alg = params.get("alg");
  const nonce = params.get("nonce");
  if (alg !== undefined && alg !== "ed25519") throw fail("AUTH_SIGNATURE_INVALID", "alg is not ed25519");
  if (typeof keyid !== "string" || keyid === "") throw fail("AUTH_IDENTITY_INVALID", "missing keyid");
  if (typeof nonce !== "string") throw fail("AUTH_NONCE_INVALID", "missing nonce");
  try {
    validateNonce(nonce);
  } catch {
    throw fail("AUTH_NONCE_INVALID", "bad nonce");
  }
  if (typeof created !== "number" || !Number.isInteger(created)) throw fail("AUTH_SIGNATURE_INVALID", "missing created");
  if (expires !== undefined && (typeof expires !== "number" || !Number.isInteger(expires))) throw fail("AUTH_SIGNATURE_INVALID", "bad expires");
  const now = (options.now ?? Date.now)() / 1000;
  const maxAge = options.maxAgeSeconds ?? 300;
  const skew = options.futureSkewSeconds ?? 30;
  if (created < now - maxAge) throw fail("AUTH_SIGNATURE_INVALID", "signature is too old");
  if (created > now + skew) throw fail("AUTH_SIGNATURE_INVALID", "signature is created in the future");
  if (typeof expires === "number" && now > expires) throw fail("AUTH_SIGNATURE_INVALID", "signature has expired");

  // The certificate names the key.
  let cert: Certificate;
  try {
    cert = JSON.parse(utf8Decoder.decode(fromBase64(certHeader))) as Certificate;
    await verifyCertificate(cert);
  } catch {
    throw fail("AUTH_IDENTITY_INVALID", "bad idn-agent-cert");
  }
  if (cert.namespace !== ns || cert.publicKey !== keyHeader || cert.keyId !== keyid) throw fail("AUTH_IDENTITY_INVALID", "certificate does not match the request");
  if (cert.expiresAt && Date.parse(cert.expiresAt) / 1000 <= now) throw fail("AUTH_IDENTITY_INVALID", "certificate has expired");
  if (Date.parse(cert.issuedAt) / 1000 > now + skew) throw fail("AUTH_IDENTITY_INVALID", "certificate is issued in the future");

  // The signature, over the lower-cased or the as-sent method.
  // As received: a URL object's href, or the string without its fragment.
  const target = typeof req.url === "string" ? req.url.replace(/#.*$/, "") : req.url.href.slice(0, req.url.href.length - req.url.hash.length);
  const values: Record<string, string> = { "@target-uri": target, "idn-namespace": ns, "idn-subject": subjectHeader, "idn-agent-key": keyHeader, "idn-agent-cert": certHeader };
  if (body.length > 0) values["content-digest"] = (digestLines[0] ?? "").trim();
  for (const name of MCP_ROUTING.slice(0, routed)) values[name] = one(req.headers, name, "AUTH_HEADERS_INVALID");
  const paramsLine = signatureParams(list);
  const crypto = await backend();
  const key = fromBase64(keyHeader.slice("ed25519:".length));
  let verified = false;
  for (const method of new Set([req.method.toLowerCase(), req.method])) {
    const base = list.items.map((it) => `"${it.value as string}": ${it.value === "@method" ? method : values[it.value as string]}`).join("\n") + `\n"@signature-params": ${paramsLine}`;
    if (signature.length === 64 && (await crypto.verify(key, utf8.encode(base), signature))) {
      verified = true;
      break;
    }
  }
  if (!verified) throw fail("AUTH_SIGNATURE_INVALID", "signature does not verify");
  if (body.length > 0) await checkDigest(values["content-digest"]!, body);

  if (!(await options.nonces.check(ns, nonce, new Date((created + maxAge) * 1000)))) throw fail("AUTH_REPLAY_DETECTED", "nonce already seen");
  return {
    namespace: ns,
    subject,
    name: cert.name || undefined,
    keyId: keyid,
    publicKey: keyHeader,
    fingerprint: keyid.slice(keyid.indexOf("#") + 1),
    nonce,
    created: new Date(created * 1000),
  };
}

function signatureParams(list: InnerList): string {
  return "(" + list.items.map((it) => serializeBare(it.value)).join(" ") + ")" + serializeParams(list.params);
}

/** Checks an RFC 9530 Content-Digest (sha-256 and sha-512; every one present must match). */
async function checkDigest(field: string, body: Uint8Array): Promise<void> {
  let dict;
  try {
    dict = parseDictionary(field);
  } catch {
    throw fail("AUTH_SIGNATURE_INVALID", "content-digest is not a structured dictionary");
  }
  let checked = 0;
  for (const [alg, name] of [["sha-256", "SHA-256"], ["sha-512", "SHA-512"]] as const) {
    const m = dict.get(alg);
    if (!m) continue;
    if (isInnerList(m) || !(m.value instanceof Uint8Array)) throw fail("AUTH_SIGNATURE_INVALID", "content-digest member is not a byte sequence");
    const got = new Uint8Array(await globalThis.crypto.subtle.digest(name, body as unknown as BufferSource));
    if (toBase64(got) !== toBase64(m.value)) throw fail("AUTH_SIGNATURE_INVALID", "content-digest does not match the body");
    checked++;
  }
  if (checked === 0) throw fail("AUTH_SIGNATURE_INVALID", "content-digest has no sha-256 or sha-512");
}

/**
 * A NonceStore in this process's memory: entries leave when their time
 * passes; when maxEntries are held, check throws (refuse, never forget a
 * nonce early: a flood can deny service but never make a replay pass).
 */
export class MemoryNonceStore implements NonceStore {
  #seen = new Map<string, number>();
  #now: () => number;
  constructor(readonly maxEntries = 1_000_000, now: () => number = Date.now) {
    this.#now = now;
  }
  check(namespace: string, nonce: string, until: Date): boolean {
    const t = this.#now();
    const key = namespace + "\n" + nonce;
    const had = this.#seen.get(key);
    if (had !== undefined && had > t) return false;
    if (this.#seen.size >= this.maxEntries) {
      for (const [k, exp] of this.#seen) if (exp <= t) this.#seen.delete(k);
      if (this.#seen.size >= this.maxEntries) throw new Error("idn: nonce store full");
    }
    this.#seen.set(key, until.getTime());
    return true;
  }
}

/** Options of the middleware: verification, and optionally the control plane's claim check. */
export interface MiddlewareOptions extends VerifyOptions {
  /** Lets only approved agents through (controlPlaneClaims); absent: every verified agent. */
  claims?: (agent: VerifiedAgent) => Promise<ClaimDecision>;
}

/** A refusal as the gateway answers it: status, the marked envelope's headers and body. */
interface Refusal {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function refusal(status: number, code: string, error: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): Refusal {
  const envelope = { error, code, timestamp: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"), ...extra };
  return { status, headers: { "content-type": "application/json", [MARK_HEADER]: code, ...headers }, body: JSON.stringify(envelope) };
}

/** Verifies and checks the claim: the agent, or the refusal to answer. */
async function admit(req: ReceivedRequest, options: MiddlewareOptions): Promise<VerifiedAgent | Refusal> {
  let agent: VerifiedAgent;
  try {
    agent = await verifyRequest(req, options);
  } catch (e) {
    if (!(e instanceof VerifyError)) throw e;
    return refusal(e.status, e.code, e.message.slice(e.code.length + 2));
  }
  if (!options.claims) return agent;
  let d: ClaimDecision;
  try {
    d = await options.claims(agent);
  } catch {
    return refusal(503, "AUTH_CLAIMS_UNAVAILABLE", "the control plane cannot be reached to check the claim", {}, { "retry-after": "2" });
  }
  if (d.authorized) return agent;
  const message = d.code === "AUTH_CLAIM_REQUIRED" ? "this agent is not approved for this service; the namespace owner must approve the claim" : "the namespace owner refused this agent's claim";
  return refusal(403, d.code, message, { ...(d.claimId ? { claim_id: d.claimId } : {}), ...(d.claimStatus ? { claim_status: d.claimStatus } : {}) });
}

const isRefusal = (x: VerifiedAgent | Refusal): x is Refusal => "status" in x;

/**
 * Wraps a Fetch-API handler (Hono, Deno.serve, Bun.serve, Cloudflare
 * workers, Next.js route handlers) so that it runs only for a verified idn
 * agent (and, with options.claims, an approved one); others get the
 * gateway's envelope, marked with Idn-Error. url overrides the URL the
 * client addressed when a proxy changed it.
 */
export function withIdnAgent(
  handler: (request: Request, agent: VerifiedAgent) => Response | Promise<Response>,
  options: MiddlewareOptions & { url?: (request: Request) => string },
): (request: Request) => Promise<Response> {
  return async (request) => {
    const body = new Uint8Array(await request.clone().arrayBuffer());
    const got = await admit({ method: request.method, url: options.url?.(request) ?? request.url, headers: request.headers, body }, options);
    if (isRefusal(got)) return new Response(got.body, { status: got.status, headers: got.headers });
    return handler(request, got);
  };
}

/** The parts of a Node request (node:http, Express, Fastify's raw) the middleware reads. */
export interface NodeRequest {
  method?: string;
  url?: string;
  headers: Record<string, string | string[] | undefined>;
  /** Set by a body parser that ran before, e.g. express.raw(); else the stream is read. */
  body?: unknown;
  socket?: { encrypted?: boolean };
  /** True once the body stream was read, by a parser that ran before. */
  readableEnded?: boolean;
  on(event: "data", listener: (chunk: Uint8Array) => void): unknown;
  on(event: "end" | "error", listener: (err?: unknown) => void): unknown;
  [key: string]: unknown;
}

/** The parts of a Node response the middleware writes. */
export interface NodeResponse {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body: string): unknown;
}

/**
 * Middleware for Express (and node:http handlers): verifies the request,
 * sets req.idnAgent and calls next(); others get the gateway's 403
 * envelope, marked with Idn-Error. It reads the raw body itself (setting
 * req.body to its bytes) unless a raw body parser ran before; JSON parsers
 * go after it. url overrides the URL the client addressed (default: the
 * Host header and the request target, http unless the socket is TLS).
 */
export function idnAgentMiddleware(options: MiddlewareOptions & { url?: (req: NodeRequest) => string }) {
  return (req: NodeRequest, res: NodeResponse, next: (err?: unknown) => void): void => {
    rawBody(req)
      .then(async (body) => {
        const host = req.headers.host;
        const url = options.url?.(req) ?? `${req.socket?.encrypted ? "https" : "http"}://${Array.isArray(host) ? host[0] : host}${req.url ?? "/"}`;
        const got = await admit({ method: req.method ?? "GET", url, headers: req.headers, body }, options);
        if (!isRefusal(got)) {
          req.idnAgent = got;
          return next();
        }
        res.statusCode = got.status;
        for (const [k, v] of Object.entries(got.headers)) res.setHeader(k, v);
        res.end(got.body);
      })
      .catch((err) => next(err));
  };
}

function rawBody(req: NodeRequest): Promise<Uint8Array> {
  if (req.body instanceof Uint8Array) return Promise.resolve(req.body);
  if (req.readableEnded) return Promise.reject(new Error("idn: the body was read before idnAgentMiddleware; put it first, or express.raw() before it"));
  return new Promise((resolve, reject) => {
    const chunks: Uint8Array[] = [];
    req.on("data", (c) => chunks.push(c));
    req.on("error", reject);
    req.on("end", () => {
      const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const c of chunks) {
        out.set(c, at);
        at += c.length;
      }
      req.body = out;
      resolve(out);
    });
  });
}

/** What the control plane says of an agent's approval for a service. */
export type ClaimDecision =
  | { authorized: true; claimId?: string }
  | { authorized: false; code: "AUTH_CLAIM_REQUIRED" | "AUTH_CLAIM_REJECTED" | "AUTH_CLAIM_REVOKED"; claimId?: string; claimStatus?: string };

/** Options of controlPlaneClaims. */
export interface ClaimCheckOptions {
  /** The control plane's base URL, e.g. "https://idn.example.com". */
  controlPlane: string;
  /** The service's API key (idn_sk_…). */
  apiKey: string;
  /** The service's slug, which its API key belongs to. */
  service: string;
  /** The service's own identity: the control plane's service routes take signed requests. */
  identity: Identity;
  /** The fetch that sends (default: globalThis.fetch). */
  fetch?: FetchLike;
}

const REFUSED_CODE = { rejected: "AUTH_CLAIM_REJECTED", revoked: "AUTH_CLAIM_REVOKED" } as const;

/**
 * Returns the control plane's claim check, as the gateway makes it (signed
 * as o.identity, with the service's API key): an
 * approved (namespace, key, service) passes; a rejected or revoked claim
 * refuses; otherwise a claim is filed (or the pending one named) for the
 * namespace's owner to approve, and the agent is told AUTH_CLAIM_REQUIRED.
 * Throws when the control plane cannot answer (AUTH_CLAIMS_UNAVAILABLE).
 */
export function controlPlaneClaims(o: ClaimCheckOptions): (agent: VerifiedAgent) => Promise<ClaimDecision> {
  const send = idnFetch(o.identity, o.fetch ? { fetch: o.fetch } : {});
  const base = o.controlPlane.replace(/\/+$/, "");
  const auth = { authorization: `Bearer ${o.apiKey}` };
  const call = async (path: string, init: RequestInit = {}) => {
    const r = await send(base + path, { ...init, headers: { ...auth, ...(init.headers as Record<string, string>) } });
    if (!r.ok) throw new Error(`idn: control plane answered ${r.status} to ${path.split("?")[0]}`);
    return (await r.json()) as Record<string, unknown>;
  };
  return async (agent) => {
    const q = new URLSearchParams({ namespace: agent.namespace, public_key: agent.publicKey, service: o.service });
    const v = await call(`/v1/verify?${q}`);
    if (v.authorized === true) return { authorized: true, claimId: v.claim_id as string };
    const filed = await call("/v1/claims", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ namespace: agent.namespace, public_key: agent.publicKey, service: o.service, subject: agent.subject, ...(agent.name ? { agent_name: agent.name } : {}), nonce: agent.nonce }),
    });
    const status = String(filed.status ?? "");
    const claimId = typeof filed.claim_id === "string" ? filed.claim_id : undefined;
    if (status === "approved") return { authorized: true, ...(claimId ? { claimId } : {}) };
    const code = status === "rejected" || status === "revoked" ? REFUSED_CODE[status] : "AUTH_CLAIM_REQUIRED";
    return { authorized: false, code, ...(claimId ? { claimId } : {}), claimStatus: status };
  };
}
