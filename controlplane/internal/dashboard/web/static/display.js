// shown writes out, as \uXXXX (\UXXXXXXXX beyond U+FFFF), each character
// a display string may not hold, by the rule both servers apply at input
// (the Go package identity/display): a connection name stored before the
// rule, or sent by an older gateway, shows what it holds, and a U+202E
// cannot reorder what the owner reads.
const hidden = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Zs}\p{Co}\p{Cs}\p{Noncharacter_Code_Point}\u034F\u115F\u1160\u17B4\u17B5\u2065\u3164\uFFA0\uFFF0-\uFFF8\u{E0000}-\u{E00FF}\u{E01F0}-\u{E0FFF}]/gu;

const hex = (n, width) => n.toString(16).toUpperCase().padStart(width, '0');

export function shown(s) {
  return String(s ?? '').replace(hidden, (c) => {
    if (c === ' ') return c;
    const n = c.codePointAt(0);
    return n > 0xffff ? `\\U${hex(n, 8)}` : `\\u${hex(n, 4)}`;
  });
}

// urlPieces cuts a URL after each slash that does not start "//", as the
// Go template function of the same name does: the pages show each piece
// unbroken, so an address wraps after a slash of its path, never inside
// its host.
export function urlPieces(u) {
  return String(u ?? '').match(/(?:[^/]|\/(?=\/))*\/?/g).filter((p) => p !== '');
}
