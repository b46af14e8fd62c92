// Agent identities in the idn CLI's format and place, and signing under the
// idn-rfc9421-v1 profile (docs/profile.md).

import { backend, type Backend, type KeyPair } from "./crypto.js";
import { encodeSubject, fromBase64, toBase64, toBase64Url, toHex, utf8 } from "./encoding.js";
import { validateName, validateNamespace, validateNonce, validateSubject } from "./rules.js";

/** The signing profile this package implements. */
export const PROFILE = "idn-rfc9421-v1";

/** A self-signed agent certificate, as in the identity record and the idn-agent-cert header. */
export interface Certificate {
  version: 1;
  namespace: string;
  did: string;
  keyId: string;
  publicKey: string;
  issuedAt: string;
  expiresAt: string | null;
  /** The agent's display name; absent for none. */
  name?: string;
  proof: { alg: "ed25519"; sig: string };
}

/** What sign() needs of a request. */
export interface RequestToSign {
  method: string;
  /** The absolute URL as it will be sent (path and query exactly). */
  url: string | URL;
  /** The body as it will be sent; empty or absent for none. */
  body?: Uint8Array | string | null;
  /**
   * MCP's routing headers as sent (MCP 2026-07-28), covered after the
   * profile's components when the request has a body: mcp-method, then
   * mcp-name when mcp-method is there too.
   */
  mcp?: { method?: string | null; name?: string | null };
}

/** Options of one signature; the defaults sign now, with a random nonce, as the namespace. */
export interface SignOptions {
  /** idn-subject: who the agent acts for (default: the namespace). */
  subject?: string;
  /** The nonce (default: 16 random bytes in hex). Never reuse one. */
  nonce?: string;
  /** The signature's creation time (default: now). */
  created?: Date | number;
}

/** The headers that sign a request, lower-case names; content-digest only with a body. */
export interface SignedHeaders {
  "idn-namespace": string;
  "idn-subject": string;
  "idn-agent-key": string;
  "idn-agent-cert": string;
  "content-digest"?: string;
  "signature-input": string;
  signature: string;
  [name: string]: string | undefined;
}

/** Makes an Ed25519 signature over data with a key kept outside this process. */
export type ExternalSigner = (data: Uint8Array) => Uint8Array | Promise<Uint8Array>;

/** Where and how an identity is read and written. */
export interface HomeOptions {
  /** The idn home folder (default: $IDN_HOME, else ~/.idn). */
  home?: string;
}

/** Options of Identity.create and Identity.fromSeed. */
export interface CreateOptions {
  /** The agent's display name, shown to owners on its claims. */
  name?: string;
  /** When the certificate is issued (default: now). */
  issuedAt?: Date;
}

const KNOWN_FIELDS = new Set(["version", "namespace", "did", "keyId", "publicKey", "privateKey", "certificate", "createdAt", "updatedAt"]);

function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** The lines a certificate proof signs (docs/profile.md). */
export function certificateCanonicalText(c: Certificate): string {
  const lines = [
    "idn-certificate-v1",
    "namespace:" + c.namespace,
    "did:" + c.did,
    "key-id:" + c.keyId,
    "public-key:" + c.publicKey,
    "issued-at:" + c.issuedAt,
    "expires-at:" + (c.expiresAt ?? ""),
  ];
  if (c.name) lines.push("name:" + c.name);
  return lines.join("\n");
}

/** The certificate in the profile's member order, for JSON encoding. */
function orderedCertificate(c: Certificate): Certificate {
  const o: Certificate = {
    version: 1,
    namespace: c.namespace,
    did: c.did,
    keyId: c.keyId,
    publicKey: c.publicKey,
    issuedAt: c.issuedAt,
    expiresAt: c.expiresAt ?? null,
  } as Certificate;
  if (c.name) o.name = c.name;
  o.proof = { alg: c.proof.alg, sig: c.proof.sig };
  return o;
}

/** The idn-agent-cert header value: base64url, unpadded, of the compact certificate JSON. */
export function encodeCertificateHeader(c: Certificate): string {
  return toBase64Url(utf8.encode(JSON.stringify(orderedCertificate(c))));
}

/** "did:idn:<namespace>". */
export function did(namespace: string): string {
  return "did:idn:" + namespace;
}

async function keyId(namespace: string, publicKey: Uint8Array): Promise<string> {
  const digest = await (await backend()).sha256(publicKey);
  return `${did(namespace)}#ed25519-${toHex(digest.slice(0, 8))}`;
}

async function issueCertificate(namespace: string, name: string | undefined, key: KeyPair, issuedAt: Date, expiresAt: string | null): Promise<Certificate> {
  validateNamespace(namespace);
  if (name) validateName(name);
  const c: Certificate = {
    version: 1,
    namespace,
    did: did(namespace),
    keyId: await keyId(namespace, key.publicKey),
    publicKey: "ed25519:" + toBase64(key.publicKey),
    issuedAt: rfc3339(issuedAt),
    expiresAt,
    proof: { alg: "ed25519", sig: "" },
  };
  if (name) c.name = name;
  c.proof.sig = toBase64Url(await key.sign(utf8.encode(certificateCanonicalText(c))));
  return c;
}

/**
 * Checks a certificate's own consistency and proof: version 1, a valid
 * namespace and DID, a key id under it, a valid name if any, and an Ed25519
 * proof under its public key. Throws a TypeError saying what is wrong.
 */
export async function verifyCertificate(c: Certificate): Promise<void> {
  if (c?.version !== 1) throw new TypeError("idn: certificate version must be 1");
  validateNamespace(c.namespace);
  if (c.did !== did(c.namespace) || !c.keyId?.startsWith(c.did + "#") || c.keyId.length === c.did.length + 1) {
    throw new TypeError("idn: certificate did or keyId does not match its namespace");
  }
  if (c.name) validateName(c.name); // "" is no name, as in the Go implementation
  if (!c.publicKey?.startsWith("ed25519:") || c.proof?.alg !== "ed25519") throw new TypeError("idn: certificate is not ed25519");
  const pub = fromBase64(c.publicKey.slice(8));
  const sig = fromBase64(c.proof.sig);
  if (pub.length !== 32 || sig.length !== 64) throw new TypeError("idn: certificate key or proof has the wrong length");
  if (!(await (await backend()).verify(pub, utf8.encode(certificateCanonicalText(c)), sig))) {
    throw new TypeError("idn: certificate proof does not verify");
  }
}

function validSeed(seed: Uint8Array): void {
  if (!(seed instanceof Uint8Array) || seed.length !== 32) throw new TypeError("idn: an Ed25519 seed is 32 bytes");
}

/**
 * An agent identity: a namespace, an Ed25519 key and a self-signed
 * certificate, stored as the idn CLI stores it, so `idn init` and this SDK
 * share one identity.
 */
export class Identity {
  readonly namespace: string;
  /** "ed25519:<base64>", the idn-agent-key header. */
  readonly publicKey: string;
  readonly createdAt: Date;
  updatedAt: Date;
  #certificate: Certificate;
  #certHeader: string;
  #key: KeyPair;
  #crypto: Backend;
  #seed: Uint8Array | undefined; // undefined: the key lives behind an external signer
  #extra: Record<string, unknown>;
  #fixedBase: string; // the identity lines of the signature base after idn-subject's

  private constructor(crypto: Backend, namespace: string, seed: Uint8Array | undefined, key: KeyPair, certificate: Certificate, createdAt: Date, updatedAt: Date, extra: Record<string, unknown>) {
    this.#crypto = crypto;
    this.namespace = namespace;
    this.#seed = seed;
    this.#key = key;
    this.publicKey = "ed25519:" + toBase64(key.publicKey);
    this.#certificate = certificate;
    this.#certHeader = encodeCertificateHeader(certificate);
    this.#fixedBase = this.#makeFixedBase();
    this.createdAt = createdAt;
    this.updatedAt = updatedAt;
    this.#extra = extra;
  }

  #makeFixedBase(): string {
    return `"idn-agent-key": ${this.publicKey}\n"idn-agent-cert": ${this.#certHeader}\n`;
  }

  /** Creates an identity with a fresh key and a certificate issued now (or at options.issuedAt). */
  static async create(namespace: string, options: CreateOptions = {}): Promise<Identity> {
    return Identity.fromSeed(namespace, (await backend()).random(32), options);
  }

  /** Builds an identity from a 32-byte Ed25519 seed (the record's privateKey). */
  static async fromSeed(namespace: string, seed: Uint8Array, options: CreateOptions = {}): Promise<Identity> {
    validateNamespace(namespace);
    validSeed(seed);
    const issued = new Date(Math.floor((options.issuedAt ?? new Date()).getTime() / 1000) * 1000);
    const crypto = await backend();
    const key = await crypto.keyPair(seed);
    const cert = await issueCertificate(namespace, options.name, key, issued, null);
    return new Identity(crypto, namespace, Uint8Array.from(seed), key, cert, issued, issued, {});
  }

  /**
   * An identity whose private key never enters this process: sign makes
   * the Ed25519 signature wherever the key lives (an OS keychain, a
   * hardware token, a cloud KMS). Without options.certificate, a new
   * certificate is issued through sign; with one (kept from earlier, e.g.
   * identity.certificate), it is checked against publicKey and reused.
   * Such an identity signs and renames but has no record to save.
   */
  static async withSigner(namespace: string, publicKey: Uint8Array, sign: ExternalSigner, options: CreateOptions & { certificate?: Certificate } = {}): Promise<Identity> {
    validateNamespace(namespace);
    if (!(publicKey instanceof Uint8Array) || publicKey.length !== 32) throw new TypeError("idn: an Ed25519 public key is 32 bytes");
    const key: KeyPair = { publicKey: Uint8Array.from(publicKey), sign: async (data) => Uint8Array.from(await sign(data)) };
    let cert = options.certificate;
    const issued = new Date(Math.floor((options.issuedAt ?? new Date()).getTime() / 1000) * 1000);
    if (cert === undefined) cert = await issueCertificate(namespace, options.name, key, issued, null);
    await verifyCertificate(cert); // also proves that sign signs with publicKey
    if (cert.namespace !== namespace || cert.publicKey !== "ed25519:" + toBase64(key.publicKey)) {
      throw new TypeError("idn: certificate is not for this namespace and key");
    }
    const at = new Date(cert.issuedAt);
    return new Identity(await backend(), namespace, undefined, key, orderedCertificate(cert), at, at, {});
  }

  /** The DID, "did:idn:<namespace>". */
  get did(): string {
    return did(this.namespace);
  }
  /** The key id, the signature's keyid. */
  get keyId(): string {
    return this.#certificate.keyId;
  }
  /** The key's fingerprint, "ed25519-<16 hex>": the key id's fragment, as owners see it on the claims page. */
  get fingerprint(): string {
    return this.keyId.slice(this.keyId.indexOf("#") + 1);
  }
  /** The display name the certificate carries, or undefined. */
  get name(): string | undefined {
    return this.#certificate.name;
  }
  /** A copy of the certificate. */
  get certificate(): Certificate {
    return JSON.parse(JSON.stringify(this.#certificate)) as Certificate;
  }
  /** The idn-agent-cert header value. */
  get certificateHeader(): string {
    return this.#certHeader;
  }

  /**
   * Gives the identity a new display name (undefined removes it) with a new
   * certificate for the same key, so approvals of the key stand. save() writes it.
   */
  async rename(name: string | undefined, now: Date = new Date()): Promise<void> {
    const cert = await issueCertificate(this.namespace, name, this.#key, now, this.#certificate.expiresAt);
    this.#certificate = cert;
    this.#certHeader = encodeCertificateHeader(cert);
    this.#fixedBase = this.#makeFixedBase();
    this.updatedAt = new Date(Math.floor(now.getTime() / 1000) * 1000);
  }

  /** The identity record (the file's JSON text), with any unknown fields it was loaded with. */
  toRecord(): string {
    if (this.#seed === undefined) {
      throw new TypeError("idn: an identity with an external signer has no record; keep identity.certificate and pass it to Identity.withSigner");
    }
    const rec: Record<string, unknown> = {
      version: 1,
      namespace: this.namespace,
      did: this.did,
      keyId: this.keyId,
      publicKey: this.publicKey,
      privateKey: toBase64(this.#seed),
      certificate: orderedCertificate(this.#certificate),
      createdAt: rfc3339(this.createdAt),
      updatedAt: rfc3339(this.updatedAt),
    };
    for (const k of Object.keys(this.#extra).sort()) rec[k] = this.#extra[k];
    return JSON.stringify(rec, null, 2) + "\n";
  }

  /** Parses an identity record, checking the key pair and the certificate. Unknown fields are kept. */
  static async fromRecord(text: string): Promise<Identity> {
    let rec: Record<string, any>;
    try {
      rec = JSON.parse(text);
    } catch {
      throw new TypeError("idn: identity record is not JSON");
    }
    if (rec === null || typeof rec !== "object" || Array.isArray(rec)) throw new TypeError("idn: identity record is not a JSON object");
    if (rec.version !== 1) throw new TypeError(`idn: identity record version ${rec.version}, want 1`);
    validateNamespace(rec.namespace);
    const seed = fromBase64(String(rec.privateKey ?? ""));
    validSeed(seed);
    const crypto = await backend();
    const key = await crypto.keyPair(seed);
    const publicKey = "ed25519:" + toBase64(key.publicKey);
    if (rec.publicKey !== publicKey) throw new TypeError("idn: identity record publicKey does not match privateKey");
    const cert = rec.certificate as Certificate;
    await verifyCertificate(cert);
    if (cert.publicKey !== publicKey || cert.namespace !== rec.namespace || rec.did !== did(rec.namespace) || rec.keyId !== cert.keyId) {
      throw new TypeError("idn: certificate does not match the identity record");
    }
    const created = new Date(rec.createdAt);
    const updated = new Date(rec.updatedAt);
    if (isNaN(created.getTime()) || isNaN(updated.getTime())) throw new TypeError("idn: createdAt and updatedAt must be RFC 3339");
    const extra: Record<string, unknown> = {};
    for (const k of Object.keys(rec)) if (!KNOWN_FIELDS.has(k)) extra[k] = rec[k];
    return new Identity(crypto, rec.namespace, seed, key, cert, created, updated, extra);
  }

  /** The file of namespace's identity: <home>/identities/<namespace>/identity.json. */
  static async path(namespace: string, options: HomeOptions = {}): Promise<string> {
    validateNamespace(namespace);
    const { join } = await import("node:path");
    return join(await home(options), "identities", namespace, "identity.json");
  }

  /**
   * Loads the identity of namespace from the idn home; without a namespace,
   * the only identity there. Node (or a runtime with node:fs) only.
   */
  static async load(namespace?: string, options: HomeOptions = {}): Promise<Identity> {
    const h = await home(options);
    if (namespace === undefined) {
      const names = await Identity.list(options);
      if (names.length !== 1) {
        throw new Error(names.length === 0 ? `idn: no identity in ${h}; create one with Identity.create or 'idn init'` : `idn: several identities in ${h} (${names.join(", ")}); name one`);
      }
      namespace = names[0]!;
    }
    const fs = await import("node:fs/promises");
    const path = await Identity.path(namespace, options);
    let text: string;
    try {
      text = await fs.readFile(path, "utf8");
    } catch (e: any) {
      if (e?.code === "ENOENT") throw new Error(`idn: no identity ${JSON.stringify(namespace)} in ${h}`);
      throw e;
    }
    const id = await Identity.fromRecord(text);
    if (id.namespace !== namespace) throw new TypeError(`idn: ${path} holds namespace ${JSON.stringify(id.namespace)}`);
    return id;
  }

  /** The namespaces with an identity in the idn home, sorted. */
  static async list(options: HomeOptions = {}): Promise<string[]> {
    const fs = await import("node:fs/promises");
    const { join } = await import("node:path");
    const dir = join(await home(options), "identities");
    let entries: Array<{ name: string; isDirectory(): boolean }>;
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch (e: any) {
      if (e?.code === "ENOENT") return [];
      throw e;
    }
    const out: string[] = [];
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      try {
        validateNamespace(e.name);
        if ((await fs.stat(join(dir, e.name, "identity.json"))).isFile()) out.push(e.name);
      } catch {
        // not an identity folder
      }
    }
    return out.sort();
  }

  /**
   * Writes the identity to the idn home atomically (a temporary file renamed
   * over the old one): folders 0700, file 0600.
   */
  async save(options: HomeOptions = {}): Promise<string> {
    const fs = await import("node:fs/promises");
    const { join, dirname } = await import("node:path");
    const h = await home(options);
    const path = await Identity.path(this.namespace, options);
    const dir = dirname(path);
    for (const d of [h, join(h, "identities"), dir]) {
      try {
        await fs.mkdir(d, { mode: 0o700 });
      } catch (e: any) {
        if (e?.code !== "EEXIST") throw e;
      }
    }
    await fs.chmod(dir, 0o700);
    const tmp = join(dir, `.identity-${toHex((await backend()).random(6))}.json`);
    try {
      await fs.writeFile(tmp, this.toRecord(), { mode: 0o600, flag: "wx" });
      const f = await fs.open(tmp, "r+");
      try {
        await f.sync();
      } finally {
        await f.close();
      }
      await fs.rename(tmp, path);
    } finally {
      await fs.rm(tmp, { force: true });
    }
    return path;
  }

  /**
   * Signs a request under the profile and returns the headers to add (set
   * them, replacing any of the same name). The URL and body must be exactly
   * what is sent.
   */
  async sign(request: RequestToSign, options: SignOptions = {}): Promise<SignedHeaders> {
    const { base, headers } = this.#build(request, options, await this.#digest(request.body));
    const sig = this.#key.sign(utf8.encode(base));
    headers.signature = `sig1=:${toBase64(sig instanceof Uint8Array ? sig : await sig)}:`;
    return headers;
  }

  /** The signature base sign() signs for the same request and options (fix nonce and created to compare). */
  async signatureBase(request: RequestToSign, options: SignOptions = {}): Promise<string> {
    return this.#build(request, options, await this.#digest(request.body)).base;
  }

  /** The content-digest of a body, undefined for none. */
  #digest(body: RequestToSign["body"]): string | undefined | Promise<string> {
    const bytes = typeof body === "string" ? utf8.encode(body) : body;
    if (!bytes || bytes.length === 0) return undefined;
    const d = this.#crypto.sha256(bytes);
    return d instanceof Uint8Array ? `sha-256=:${toBase64(d)}:` : d.then((v) => `sha-256=:${toBase64(v)}:`);
  }

  // Synchronous on purpose: on Node every step is, and signing stays one
  // Ed25519 operation plus string work (see bench/sign.mjs). WebCrypto's
  // digest is computed before, in #digest.
  #build(request: RequestToSign, options: SignOptions, digest: string | undefined): { base: string; headers: SignedHeaders } {
    const url = typeof request.url === "string" ? new URL(request.url) : request.url;
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError("idn: only http and https URLs are signed");
    const target = url.href.slice(0, url.href.length - url.hash.length);
    // HTTP drops spaces and tabs at either end of a header value.
    const plain = (options.subject ?? this.namespace).replace(/^[ \t]+|[ \t]+$/g, "");
    validateSubject(plain);
    const subject = encodeSubject(plain);
    let nonce = options.nonce;
    if (nonce === undefined) nonce = toHex(this.#crypto.random(16));
    else validateNonce(nonce);
    const created = options.created === undefined ? Date.now() : options.created instanceof Date ? options.created.getTime() : options.created * 1000;
    let components = '"@method" "@target-uri" "idn-namespace" "idn-subject" "idn-agent-key" "idn-agent-cert"';
    let base = `"@method": ${request.method.toLowerCase()}\n"@target-uri": ${target}\n`;
    if (digest) {
      components = '"@method" "@target-uri" "content-digest" "idn-namespace" "idn-subject" "idn-agent-key" "idn-agent-cert"';
      base += `"content-digest": ${digest}\n`;
    }
    let routing = "";
    const mcpMethod = digest ? request.mcp?.method : undefined;
    if (mcpMethod) {
      components += ' "mcp-method"';
      routing += `"mcp-method": ${mcpMethod.trim()}\n`;
      const mcpName = request.mcp?.name;
      if (mcpName) {
        components += ' "mcp-name"';
        routing += `"mcp-name": ${mcpName.trim()}\n`;
      }
    }
    const params = `${components});created=${Math.floor(created / 1000)};keyid="${this.keyId}";alg="ed25519";nonce="${nonce}"`;
    base += `"idn-namespace": ${this.namespace}\n"idn-subject": ${subject}\n${this.#fixedBase}${routing}"@signature-params": (${params}`;
    const headers: SignedHeaders = {
      "idn-namespace": this.namespace,
      "idn-subject": subject,
      "idn-agent-key": this.publicKey,
      "idn-agent-cert": this.#certHeader,
      "signature-input": "sig1=(" + params,
      signature: "",
    };
    if (digest) headers["content-digest"] = digest;
    return { base, headers };
  }
}

/** The idn home: options.home, else $IDN_HOME, else ~/.idn. */
export async function home(options: HomeOptions = {}): Promise<string> {
  if (options.home) return options.home;
  const env = typeof process !== "undefined" ? process?.env?.IDN_HOME : undefined;
  if (env) return env;
  const { homedir } = await import("node:os");
  const { join } = await import("node:path");
  return join(homedir(), ".idn");
}
