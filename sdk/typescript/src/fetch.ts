// A fetch that signs every request: for REST calls through a gateway's
// /proxy/…, signed control-plane routes, and the MCP TypeScript SDK's
// Streamable HTTP client transport (its `fetch` option).

import { noteSigner, parseRetryAfter, sleep } from "./errors.js";
import type { Identity, SignOptions } from "./identity.js";

/** The fetch signature the MCP SDK's transports accept. */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** How idnFetch retries; the zero value retries idempotent requests twice. */
export interface RetryOptions {
  /** Tries after the first (default 2; 0 turns retrying off). */
  retries?: number;
  /** Also retry POST and PATCH: only when sending one twice is harmless. */
  nonIdempotent?: boolean;
  /** The first pause (default 500 ms); it doubles up to maxDelayMs, jittered. */
  initialDelayMs?: number;
  /** The longest pause (default 10000 ms); a longer Retry-After ends retrying. */
  maxDelayMs?: number;
}

/** Options of idnFetch. */
export interface FetchOptions {
  /** idn-subject for every request (default: the namespace). */
  subject?: string;
  /** The fetch that sends (default: globalThis.fetch). */
  fetch?: FetchLike;
  /** Retries of 429, 502, 503, 504 and network errors (default: idempotent methods, twice). */
  retry?: RetryOptions;
}

/** The headers a signature consists of; a redirected request carries none. */
const SIGNING = ["signature", "signature-input", "content-digest", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert"];
/** Credentials fetch itself drops when a redirect leaves the origin. */
const CREDENTIALS = ["authorization", "cookie", "proxy-authorization"];
const BODY_HEADERS = ["content-type", "content-length", "content-encoding", "content-language", "content-location"];
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]);
const RETRY_STATUS = new Set([429, 502, 503, 504]);
const REDIRECT_STATUS = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 20; // as fetch

/**
 * Returns a fetch that signs each request with identity (a fresh nonce and
 * time each try) and sends it with options.fetch. The body is read once to
 * compute content-digest and sent as those bytes.
 *
 * Redirects are not followed unless init.redirect is "follow": a signature
 * is for one URL, so a followed redirect goes without the signing headers
 * and without the body (a 301, 302 or 303 as GET), and without credentials
 * when it leaves the origin. Idempotent requests answered 429, 502, 503 or
 * 504, or failing on the network, are retried (see RetryOptions), each try
 * signed afresh.
 */
export function idnFetch(identity: Identity, options: FetchOptions = {}): FetchLike {
  const send: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const retry = options.retry ?? {};
  const retries = retry.retries ?? 2;
  const initialDelay = retry.initialDelayMs ?? 500;
  const maxDelay = retry.maxDelayMs ?? 10_000;
  return async (input, init) => {
    const req = new Request(input, init);
    const body = req.method === "GET" || req.method === "HEAD" ? undefined : new Uint8Array(await req.arrayBuffer());
    const signOptions: SignOptions = options.subject === undefined ? {} : { subject: options.subject };
    const url = sentURL(req.url);
    const signal = init?.signal ?? req.signal;
    const redirect = init?.redirect ?? "manual";
    const mayRetry = retries > 0 && (IDEMPOTENT.has(req.method) || retry.nonIdempotent === true);
    let delay = initialDelay;
    for (let attempt = 0; ; attempt++) {
      const mcp = { method: req.headers.get("mcp-method"), name: req.headers.get("mcp-name") };
      const signed = await identity.sign({ method: req.method, url, body: body ?? null, mcp }, signOptions);
      const headers = new Headers(req.headers);
      for (const name of SIGNING) headers.delete(name);
      for (const [name, value] of Object.entries(signed)) if (value !== undefined) headers.set(name, value);
      const last = !mayRetry || attempt >= retries;
      let response: Response;
      try {
        response = await send(url, { method: req.method, headers, body: body && body.length > 0 ? body : null, signal, redirect: "manual" });
      } catch (e) {
        if (last || signal?.aborted || !(e instanceof TypeError)) throw e; // fetch's network error is a TypeError
        await sleep(jitter(delay), signal);
        delay = Math.min(delay * 2, maxDelay);
        continue;
      }
      if (!last && RETRY_STATUS.has(response.status)) {
        const after = parseRetryAfter(response.headers.get("retry-after"), Date.now());
        if (after === undefined || after * 1000 <= maxDelay) {
          await response.body?.cancel();
          await sleep(after !== undefined ? after * 1000 : jitter(delay), signal);
          delay = Math.min(delay * 2, maxDelay);
          continue;
        }
      }
      noteSigner(response, identity.fingerprint);
      return redirect === "manual" ? response : followUnsigned(send, response, url, req, body, redirect, signal);
    }
  };
}

/** A pause of d/2 to d, so that clients refused together do not retry together. */
function jitter(d: number): number {
  return d / 2 + Math.random() * (d / 2);
}

/**
 * Follows the redirects of a signed request's answer as fetch's "follow"
 * (or refuses them, "error"), sending each next request without the
 * signing headers and without the body.
 */
async function followUnsigned(send: FetchLike, response: Response, url: string, req: Request, body: Uint8Array | undefined, mode: RequestRedirect, signal: AbortSignal | null | undefined): Promise<Response> {
  let method = req.method;
  let from = new URL(url);
  const headers = new Headers(req.headers);
  for (const name of SIGNING) headers.delete(name);
  let sentBody = body !== undefined && body.length > 0;
  for (let hops = 0; REDIRECT_STATUS.has(response.status) && response.headers.has("location"); hops++) {
    if (mode === "error") throw new TypeError(`idn: redirected to ${response.headers.get("location")} (redirect: "error")`);
    if (hops >= MAX_REDIRECTS) throw new TypeError("idn: too many redirects");
    const to = new URL(response.headers.get("location")!, from);
    await response.body?.cancel();
    if (response.status === 303 ? method !== "HEAD" : (response.status === 301 || response.status === 302) && method === "POST") method = "GET";
    if (sentBody) {
      for (const name of BODY_HEADERS) headers.delete(name);
      sentBody = false;
    }
    if (to.origin !== from.origin) for (const name of CREDENTIALS) headers.delete(name);
    response = await send(to.href, { method, headers, body: null, signal, redirect: "manual" });
    from = to;
  }
  return response;
}

/**
 * The URL as fetch sends it: without the fragment, and without a bare '?'
 * (Node's fetch drops one with no query after it).
 */
function sentURL(href: string): string {
  const u = new URL(href);
  u.hash = "";
  return u.search === "" ? u.href.replace(/\?$/, "") : u.href;
}
