// The RFC 8941 structured fields a verifier reads: a dictionary whose
// members are inner lists of strings with parameters (Signature-Input) or
// byte sequences (Signature, Content-Digest). Anything else is refused.

import { fromBase64 } from "./encoding.js";

/** A bare item this parser reads. */
export type Bare = string | number | boolean | Uint8Array | { token: string };
export interface Item {
  value: Bare;
  params: Array<[string, Bare]>;
}
export interface InnerList {
  items: Item[];
  params: Array<[string, Bare]>;
}
export type Member = Item | InnerList;

/** Thrown for a field that is not a valid structured dictionary. */
export class SfError extends Error {}

export function isInnerList(m: Member): m is InnerList {
  return "items" in m;
}

/** Parses an RFC 8941 dictionary (§4.2.2), keeping member order. */
export function parseDictionary(input: string): Map<string, Member> {
  const p = new Parser(input);
  const out = new Map<string, Member>();
  p.ows();
  while (!p.done()) {
    const key = p.key();
    let member: Member;
    if (p.peek() === "=") {
      p.i++;
      member = p.peek() === "(" ? p.innerList() : p.item();
    } else {
      member = { value: true, params: p.params() };
    }
    out.delete(key); // a later duplicate wins, and moves to the end
    out.set(key, member);
    p.ows();
    if (p.done()) break;
    if (p.peek() !== ",") throw new SfError("expected ','");
    p.i++;
    p.ows();
    if (p.done()) throw new SfError("trailing ','");
  }
  return out;
}

class Parser {
  i = 0;
  constructor(private s: string) {}
  done(): boolean {
    return this.i >= this.s.length;
  }
  peek(): string {
    return this.s[this.i] ?? "";
  }
  ows(): void {
    while (this.peek() === " " || this.peek() === "\t") this.i++;
  }
  sp(): void {
    while (this.peek() === " ") this.i++;
  }
  key(): string {
    const m = /^[a-z*][a-z0-9_.*-]*/.exec(this.s.slice(this.i));
    if (!m) throw new SfError("bad key");
    this.i += m[0].length;
    return m[0];
  }
  params(): Array<[string, Bare]> {
    const out: Array<[string, Bare]> = [];
    while (this.peek() === ";") {
      this.i++;
      this.sp();
      const k = this.key();
      let v: Bare = true;
      if (this.peek() === "=") {
        this.i++;
        v = this.bare();
      }
      const at = out.findIndex(([name]) => name === k);
      if (at >= 0) out.splice(at, 1);
      out.push([k, v]);
    }
    return out;
  }
  item(): Item {
    const value = this.bare();
    return { value, params: this.params() };
  }
  innerList(): InnerList {
    this.i++; // (
    const items: Item[] = [];
    for (;;) {
      this.sp();
      if (this.peek() === ")") {
        this.i++;
        return { items, params: this.params() };
      }
      items.push(this.item());
      const c = this.peek();
      if (c !== " " && c !== ")") throw new SfError("bad inner list");
    }
  }
  bare(): Bare {
    const c = this.peek();
    if (c === '"') return this.string();
    if (c === ":") return this.bytes();
    if (c === "?") {
      const b = this.s.slice(this.i, this.i + 2);
      if (b !== "?0" && b !== "?1") throw new SfError("bad boolean");
      this.i += 2;
      return b === "?1";
    }
    if (c === "-" || (c >= "0" && c <= "9")) {
      const m = /^-?[0-9]{1,15}(?:\.[0-9]{1,3})?/.exec(this.s.slice(this.i));
      if (!m) throw new SfError("bad number");
      this.i += m[0].length;
      return Number(m[0]);
    }
    const t = /^[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*/.exec(this.s.slice(this.i));
    if (!t) throw new SfError("bad item");
    this.i += t[0].length;
    return { token: t[0] };
  }
  string(): string {
    let out = "";
    for (this.i++; ; ) {
      if (this.done()) throw new SfError("unterminated string");
      const c = this.s[this.i++]!;
      if (c === '"') return out;
      if (c === "\\") {
        const n = this.s[this.i++];
        if (n !== '"' && n !== "\\") throw new SfError("bad escape");
        out += n;
      } else if (c < " " || c > "~") {
        throw new SfError("bad string character");
      } else {
        out += c;
      }
    }
  }
  bytes(): Uint8Array {
    const end = this.s.indexOf(":", this.i + 1);
    if (end < 0) throw new SfError("unterminated byte sequence");
    const b64 = this.s.slice(this.i + 1, end);
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64)) throw new SfError("bad byte sequence");
    this.i = end + 1;
    return fromBase64(b64);
  }
}

/** The canonical serialization of a bare item (RFC 8941 §4.1). */
export function serializeBare(v: Bare): string {
  if (typeof v === "string") return '"' + v.replace(/[\\"]/g, (c) => "\\" + c) + '"';
  if (typeof v === "number") return String(v);
  if (typeof v === "boolean") return v ? "?1" : "?0";
  if (v instanceof Uint8Array) throw new SfError("byte sequences are not serialized here");
  return v.token;
}

/** The canonical serialization of parameters. */
export function serializeParams(params: Array<[string, Bare]>): string {
  return params.map(([k, v]) => (v === true ? `;${k}` : `;${k}=${serializeBare(v)}`)).join("");
}
