// RFC 9180 HPKE on WebCrypto: base mode, single shot, DHKEM(X25519,
// HKDF-SHA256), HKDF-SHA256 and AES-GCM. The dashboard seals every secret
// it sends to a paired gateway with it, so the control plane relays only
// ciphertext. Nothing here is a general HPKE library: one KEM, one KDF,
// the two AES-GCM key sizes, no PSK or auth modes, no exporter.

const text = new TextEncoder();
const KEM_ID = 0x0020;
const KDF_ID = 0x0001;
const NH = 32; // HKDF-SHA256 output length
const NN = 12; // AES-GCM nonce length
const empty = new Uint8Array(0);

// AEADs by RFC 9180 identifier and key length. The gateways use AES-256-GCM;
// AES-128-GCM is the suite of the RFC's own example (appendix A.1).
export const AES_256_GCM = Object.freeze({ id: 0x0002, nk: 32 });
export const AES_128_GCM = Object.freeze({ id: 0x0001, nk: 16 });

// The info that binds secrets to one gateway.
export const PAIRING_INFO = 'idn-pairing-v1';

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function i2osp(n, width) {
  const out = new Uint8Array(width);
  for (let i = width - 1; i >= 0; i--, n >>= 8) out[i] = n & 0xff;
  return out;
}

async function hmac(key, data) {
  // An empty HKDF salt is HashLen zero bytes (RFC 5869), which HMAC pads
  // the same way as an empty key.
  const k = await crypto.subtle.importKey('raw', key.length ? key : new Uint8Array(NH), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await crypto.subtle.sign('HMAC', k, data));
}

async function expand(prk, info, length) {
  const out = new Uint8Array(length);
  let t = empty;
  for (let i = 1, at = 0; at < length; i++) {
    t = await hmac(prk, concat(t, info, Uint8Array.of(i)));
    out.set(t.subarray(0, Math.min(t.length, length - at)), at);
    at += t.length;
  }
  return out;
}

const labeledExtract = (suite, salt, label, ikm) => hmac(salt, concat(text.encode('HPKE-v1'), suite, text.encode(label), ikm));

const labeledExpand = (suite, prk, label, info, length) =>
  expand(prk, concat(i2osp(length, 2), text.encode('HPKE-v1'), suite, text.encode(label), info), length);

const kemSuite = concat(text.encode('KEM'), i2osp(KEM_ID, 2));

// PKCS #8 header of a raw X25519 private key (RFC 8410).
const pkcs8Prefix = Uint8Array.of(0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20);

// ephemeralKey is a fresh X25519 key pair, or the one of the given raw
// private key (known-answer tests only: a fixed ephemeral key makes every
// seal to the same recipient share its key and nonce).
async function ephemeralKey(raw) {
  if (raw) {
    const privateKey = await crypto.subtle.importKey('pkcs8', concat(pkcs8Prefix, raw), { name: 'X25519' }, true, ['deriveBits']);
    const jwk = await crypto.subtle.exportKey('jwk', privateKey);
    return { privateKey, publicKey: fromBase64url(jwk.x) };
  }
  const pair = await crypto.subtle.generateKey({ name: 'X25519' }, true, ['deriveBits']);
  return { privateKey: pair.privateKey, publicKey: new Uint8Array(await crypto.subtle.exportKey('raw', pair.publicKey)) };
}

// setupBaseS is RFC 9180's SetupBaseS: it encapsulates to the raw X25519
// public key pkR and runs the key schedule. It answers the encapsulated key
// and the context's secrets.
export async function setupBaseS(pkR, info, aead = AES_256_GCM, ephemeralPrivateKey = undefined) {
  const eph = await ephemeralKey(ephemeralPrivateKey);
  const recipient = await crypto.subtle.importKey('raw', pkR, { name: 'X25519' }, false, []);
  const dh = new Uint8Array(await crypto.subtle.deriveBits({ name: 'X25519', public: recipient }, eph.privateKey, 256));
  const enc = eph.publicKey;
  const eaePrk = await labeledExtract(kemSuite, empty, 'eae_prk', dh);
  const sharedSecret = await labeledExpand(kemSuite, eaePrk, 'shared_secret', concat(enc, pkR), 32);

  const suite = concat(text.encode('HPKE'), i2osp(KEM_ID, 2), i2osp(KDF_ID, 2), i2osp(aead.id, 2));
  const pskIdHash = await labeledExtract(suite, empty, 'psk_id_hash', empty);
  const infoHash = await labeledExtract(suite, empty, 'info_hash', info);
  const keyScheduleContext = concat(Uint8Array.of(0), pskIdHash, infoHash);
  const secret = await labeledExtract(suite, sharedSecret, 'secret', empty);
  const key = await labeledExpand(suite, secret, 'key', keyScheduleContext, aead.nk);
  const baseNonce = await labeledExpand(suite, secret, 'base_nonce', keyScheduleContext, NN);
  return { enc, sharedSecret, keyScheduleContext, secret, key, baseNonce };
}

// seal is single-shot HPKE: enc || AES-GCM(key, base_nonce, aad, plaintext).
export async function seal(pkR, info, plaintext, { aad = empty, aead = AES_256_GCM, ephemeralPrivateKey } = {}) {
  const ctx = await setupBaseS(pkR, info, aead, ephemeralPrivateKey);
  const key = await crypto.subtle.importKey('raw', ctx.key, 'AES-GCM', false, ['encrypt']);
  const ct = new Uint8Array(await crypto.subtle.encrypt({ name: 'AES-GCM', iv: ctx.baseNonce, additionalData: aad }, key, plaintext));
  return concat(ctx.enc, ct);
}

export function fromBase64url(s) {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4));
  return Uint8Array.from(b, (c) => c.charCodeAt(0));
}

export function toBase64url(bytes) {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// sealSecrets seals a secrets object ({"NAME":"value",…}) to a gateway:
// its base64url HPKE key and its id, which the info binds, so a secret
// sealed for one gateway does not open on another. Answers the
// sealed_secrets string of an RPC.
export async function sealSecrets(gatewayId, gatewayKey, secrets) {
  const sealed = await seal(fromBase64url(gatewayKey), text.encode(PAIRING_INFO + gatewayId), text.encode(JSON.stringify(secrets)));
  return toBase64url(sealed);
}
