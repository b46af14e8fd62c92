// A fetch that signs every request: for REST calls through a gateway's
// /proxy/…, signed control-plane routes, and the MCP TypeScript SDK's
// Streamable HTTP client transport (its `fetch` option).

import { noteSigner } from "./errors.js";
import type { Identity, SignOptions } from "./identity.js";

/** The fetch signature the MCP SDK's transports accept. */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Options of idnFetch. */
export interface FetchOptions {
  /** idn-subject for every request (default: the namespace). */
  subject?: string;
  /** The fetch that sends (default: globalThis.fetch). */
  fetch?: FetchLike;
}

const SIGNING = ["signature", "signature-input", "content-digest", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert"];

/**
 * Returns a fetch that signs each request with identity (a fresh nonce and
 * time each call) and sends it with options.fetch. The body is read once
 * to compute content-digest and sent as those bytes. Redirects are not
 * followed unless init.redirect says so: a signature is for one URL.
 */
export function idnFetch(identity: Identity, options: FetchOptions = {}): FetchLike {
  const send: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  return async (input, init) => {
    const req = new Request(input, init);
    const body = req.method === "GET" || req.method === "HEAD" ? undefined : new Uint8Array(await req.arrayBuffer());
    const signOptions: SignOptions = options.subject === undefined ? {} : { subject: options.subject };
    const url = sentURL(req.url);
    const signed = await identity.sign({ method: req.method, url, body: body ?? null }, signOptions);
    const headers = new Headers(req.headers);
    for (const name of SIGNING) headers.delete(name);
    for (const [name, value] of Object.entries(signed)) if (value !== undefined) headers.set(name, value);
    const response = await send(url, {
      method: req.method,
      headers,
      body: body && body.length > 0 ? body : null,
      signal: init?.signal ?? req.signal,
      redirect: init?.redirect ?? "manual",
    });
    noteSigner(response, identity.fingerprint);
    return response;
  };
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
