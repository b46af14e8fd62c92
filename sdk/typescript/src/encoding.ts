// Byte encodings of the profile: standard base64 (keys, signatures),
// base64url without padding (certificate header and proof), UTF-8.

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_LOOKUP = (() => {
  const t = new Int16Array(128).fill(-1);
  for (let i = 0; i < 64; i++) t[B64.charCodeAt(i)] = i;
  t["-".charCodeAt(0)] = 62;
  t["_".charCodeAt(0)] = 63;
  return t;
})();

export const utf8 = new TextEncoder();
export const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

/** Standard base64 with padding. */
export function toBase64(bytes: Uint8Array): string {
  let out = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += B64[n >> 18]! + B64[(n >> 12) & 63]! + B64[(n >> 6) & 63]! + B64[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += B64[n >> 18]! + B64[(n >> 12) & 63]! + "==";
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += B64[n >> 18]! + B64[(n >> 12) & 63]! + B64[(n >> 6) & 63]! + "=";
  }
  return out;
}

/** base64url without padding. */
export function toBase64Url(bytes: Uint8Array): string {
  return toBase64(bytes).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
}

/**
 * Decodes standard base64 or base64url, padded or not. Throws on any other
 * character or a length no encoder produces.
 */
export function fromBase64(s: string): Uint8Array {
  const clean = s.replace(/=+$/, "");
  if (clean.length % 4 === 1) throw new Error("idn: bad base64 length");
  const out = new Uint8Array(Math.floor((clean.length * 3) / 4));
  let acc = 0;
  let bits = 0;
  let j = 0;
  for (let i = 0; i < clean.length; i++) {
    const c = clean.charCodeAt(i);
    const v = c < 128 ? B64_LOOKUP[c]! : -1;
    if (v < 0) throw new Error("idn: bad base64 character");
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[j++] = (acc >> bits) & 0xff;
    }
  }
  return out;
}

export function toHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

export function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

const HEX = "0123456789abcdef";

/**
 * The idn-subject header value that carries subject (docs/profile.md): the
 * subject itself when it is printable ASCII and does not begin with `%"`,
 * else an RFC 9651 Display String, `%"…"` with '%', '"' and every byte
 * outside printable ASCII as lower-case %xx of its UTF-8.
 */
export function encodeSubject(subject: string): string {
  if (!subject.startsWith('%"') && /^[\x20-\x7e]*$/.test(subject)) return subject;
  let out = '%"';
  for (const b of utf8.encode(subject)) {
    out += b === 0x25 || b === 0x22 || b < 0x20 || b > 0x7e ? "%" + HEX[b >> 4] + HEX[b & 15] : String.fromCharCode(b);
  }
  return out + '"';
}

/**
 * The subject an idn-subject header value carries: a value that begins
 * with `%"` is read strictly as an RFC 9651 Display String (lower-case hex,
 * UTF-8); any other value is the subject. Throws a TypeError on a bad one.
 */
export function decodeSubject(value: string): string {
  if (!value.startsWith('%"')) return value;
  const bad = () => new TypeError("idn: idn-subject is not a valid RFC 9651 display string");
  if (value.length < 3 || !value.endsWith('"')) throw bad();
  const inner = value.slice(2, -1);
  const bytes: number[] = [];
  for (let i = 0; i < inner.length; i++) {
    const c = inner.charCodeAt(i);
    if (c === 0x25) {
      const h = inner.slice(i + 1, i + 3);
      if (!/^[0-9a-f]{2}$/.test(h)) throw bad();
      bytes.push(parseInt(h, 16));
      i += 2;
    } else if (c === 0x22 || c < 0x20 || c > 0x7e) {
      throw bad();
    } else {
      bytes.push(c);
    }
  }
  try {
    return utf8Decoder.decode(Uint8Array.from(bytes));
  } catch {
    throw bad();
  }
}
