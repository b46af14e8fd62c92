// Ed25519 and SHA-256 through Node's crypto module on Node (synchronous and
// fastest there), or WebCrypto elsewhere (Deno, Bun, browsers, edge
// workers). Both are loaded lazily; nothing here is a dependency.

import { concat, fromBase64 } from "./encoding.js";

/** Which implementation signs: Node's crypto module or WebCrypto. */
export type CryptoBackendName = "node" | "webcrypto";

/** A private key ready to sign. */
export interface KeyPair {
  publicKey: Uint8Array; // 32 raw bytes
  sign(data: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

export interface Backend {
  name: CryptoBackendName;
  keyPair(seed: Uint8Array): Promise<KeyPair>;
  verify(publicKey: Uint8Array, data: Uint8Array, sig: Uint8Array): Promise<boolean>;
  sha256(data: Uint8Array): Uint8Array | Promise<Uint8Array>;
  random(n: number): Uint8Array;
}

// DER prefixes that turn a raw seed or public key into PKCS#8 or SPKI.
const PKCS8_ED25519 = Uint8Array.from([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]);
const SPKI_ED25519 = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);

async function nodeBackend(): Promise<Backend> {
  const c = await import("node:crypto");
  return {
    name: "node",
    async keyPair(seed) {
      const priv = c.createPrivateKey({ key: concat(PKCS8_ED25519, seed), format: "der", type: "pkcs8" });
      const spki = c.createPublicKey(priv).export({ format: "der", type: "spki" });
      return { publicKey: new Uint8Array(spki.slice(spki.length - 32)), sign: (data) => c.sign(null, data, priv) };
    },
    async verify(publicKey, data, sig) {
      const pub = c.createPublicKey({ key: concat(SPKI_ED25519, publicKey), format: "der", type: "spki" });
      return c.verify(null, data, pub, sig);
    },
    sha256: (data) => c.createHash("sha256").update(data).digest(),
    random: (n) => c.randomBytes(n),
  };
}

// WebCrypto's types want ArrayBuffer-backed views; ours are.
const bs = (u: Uint8Array) => u as unknown as BufferSource;

function webBackend(): Backend {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) throw new Error("idn: no WebCrypto (globalThis.crypto.subtle) in this runtime");
  const alg = { name: "Ed25519" };
  return {
    name: "webcrypto",
    async keyPair(seed) {
      const key = await subtle.importKey("pkcs8", bs(concat(PKCS8_ED25519, seed)), alg, true, ["sign"]);
      const jwk = await subtle.exportKey("jwk", key);
      return {
        publicKey: fromBase64(jwk.x ?? ""),
        sign: async (data) => new Uint8Array(await subtle.sign(alg, key, bs(data))),
      };
    },
    async verify(publicKey, data, sig) {
      const key = await subtle.importKey("raw", bs(publicKey), alg, false, ["verify"]);
      return subtle.verify(alg, key, bs(sig), bs(data));
    },
    sha256: async (data) => new Uint8Array(await subtle.digest("SHA-256", bs(data))),
    random: (n) => globalThis.crypto.getRandomValues(new Uint8Array(n)),
  };
}

let chosen: Promise<Backend> | undefined;

function isNode(): boolean {
  return typeof process !== "undefined" && typeof process?.versions?.node === "string";
}

/** The backend in use, chosen on first use: Node's crypto on Node, else WebCrypto. */
export function backend(): Promise<Backend> {
  chosen ??= isNode() ? nodeBackend() : Promise.resolve().then(webBackend);
  return chosen;
}

/**
 * Selects the crypto implementation for identities created or loaded from
 * now on ("node" needs the node:crypto module; "webcrypto" needs
 * globalThis.crypto.subtle with Ed25519). The default needs no call.
 */
export function useCryptoBackend(name: CryptoBackendName): void {
  chosen = name === "node" ? nodeBackend() : Promise.resolve().then(webBackend);
}

/** The name of the backend in use. */
export async function cryptoBackend(): Promise<CryptoBackendName> {
  return (await backend()).name;
}
