// The profile's value rules: namespace, display name, subject, nonce.

const NAMESPACE = /^[A-Za-z0-9](?:[A-Za-z0-9-]{1,62})[A-Za-z0-9]$/;

/** Throws unless ns is 3–64 characters of a-z A-Z 0-9 -, alphanumeric at both ends. */
export function validateNamespace(ns: string): void {
  if (typeof ns !== "string" || !NAMESPACE.test(ns)) {
    throw new TypeError(`idn: invalid namespace ${JSON.stringify(ns)}: use 3-64 characters of a-z, A-Z, 0-9 and inner hyphens`);
  }
}

// Printable: letters, marks, numbers, punctuation, symbols, ASCII space.
const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]*$/u;
// Printable characters that still render as nothing (Unicode's
// Other_Default_Ignorable_Code_Point), which the servers refuse too.
const RENDERS_AS_NOTHING = /[\u034F\u115F\u1160\u17B4\u17B5\u2065\u3164\uFFA0\uFFF0-\uFFF8\u{E0000}\u{E0002}-\u{E001F}\u{E0080}-\u{E00FF}\u{E01F0}-\u{E0FFF}]/u;

/**
 * Throws unless name can be an agent's display name: 1–64 characters, each
 * printable (a letter, mark, number, punctuation, symbol or the ASCII
 * space; no control, format or invisible characters), no space at either end.
 */
export function validateName(name: string): void {
  if (typeof name !== "string" || name.length === 0 || [...name].length > 64) {
    throw new TypeError("idn: invalid agent name: must be 1 to 64 characters");
  }
  // A lone surrogate is category Cs, so PRINTABLE refuses it too.
  if (!PRINTABLE.test(name) || RENDERS_AS_NOTHING.test(name)) throw new TypeError("idn: invalid agent name: contains an invisible or control character");
  if (name.startsWith(" ") || name.endsWith(" ")) throw new TypeError("idn: invalid agent name: starts or ends with a space");
}

/**
 * Throws unless s is a valid idn-subject: 1–256 bytes of UTF-8, each
 * character printable as in validateName (the owner reads it beside Approve).
 */
export function validateSubject(s: string): void {
  if (typeof s !== "string" || s.length === 0 || new TextEncoder().encode(s).length > 256 || !PRINTABLE.test(s) || RENDERS_AS_NOTHING.test(s)) {
    throw new TypeError("idn: subject must be 1 to 256 bytes of printable characters (no control or invisible ones)");
  }
}

/** Throws unless s is 8–128 visible ASCII characters without '"' or '\'. */
export function validateNonce(s: string): void {
  if (typeof s !== "string" || !/^[\x21\x23-\x5b\x5d-\x7e]{8,128}$/.test(s)) {
    throw new TypeError("idn: nonce must be 8 to 128 visible ASCII characters without '\"' or '\\'");
  }
}
