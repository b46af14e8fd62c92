"""The RFC 8941 structured fields a verifier reads: a dictionary whose
members are inner lists of strings with parameters (Signature-Input) or
byte sequences (Signature, Content-Digest). Anything else is refused."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Dict, List, Tuple, Union


@dataclass(frozen=True)
class Token:
    value: str


Bare = Union[str, int, float, bool, bytes, Token]
Params = List[Tuple[str, Bare]]


@dataclass
class Item:
    value: Bare
    params: Params = field(default_factory=list)


@dataclass
class InnerList:
    items: List[Item]
    params: Params = field(default_factory=list)


class SfError(ValueError):
    """A field that is not a valid structured dictionary."""


_KEY = re.compile(r"[a-z*][a-z0-9_.*-]*")
_NUMBER = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,3})?")
_TOKEN = re.compile(r"[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*")
_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def parse_dictionary(s: str) -> Dict[str, Union[Item, InnerList]]:
    """Parse an RFC 8941 dictionary (section 4.2.2), keeping member order."""
    p = _Parser(s)
    out: Dict[str, Union[Item, InnerList]] = {}
    p.ows()
    while not p.done():
        key = p.key()
        if p.peek() == "=":
            p.i += 1
            member: Union[Item, InnerList] = p.inner_list() if p.peek() == "(" else p.item()
        else:
            member = Item(True, p.params())
        out.pop(key, None)  # a later duplicate wins, and moves to the end
        out[key] = member
        p.ows()
        if p.done():
            break
        if p.peek() != ",":
            raise SfError("expected ','")
        p.i += 1
        p.ows()
        if p.done():
            raise SfError("trailing ','")
    return out


class _Parser:
    def __init__(self, s: str):
        self.s, self.i = s, 0

    def done(self) -> bool:
        return self.i >= len(self.s)

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def ows(self) -> None:
        while self.peek() in (" ", "\t") and not self.done():
            self.i += 1

    def sp(self) -> None:
        while self.peek() == " ":
            self.i += 1

    def _match(self, rx: "re.Pattern[str]", what: str) -> str:
        m = rx.match(self.s, self.i)
        if not m:
            raise SfError(f"bad {what}")
        self.i = m.end()
        return m.group(0)

    def key(self) -> str:
        return self._match(_KEY, "key")

    def params(self) -> Params:
        out: Params = []
        while self.peek() == ";":
            self.i += 1
            self.sp()
            k = self.key()
            v: Bare = True
            if self.peek() == "=":
                self.i += 1
                v = self.bare()
            out = [(n, x) for n, x in out if n != k] + [(k, v)]
        return out

    def item(self) -> Item:
        v = self.bare()
        return Item(v, self.params())

    def inner_list(self) -> InnerList:
        self.i += 1
        items: List[Item] = []
        while True:
            self.sp()
            if self.peek() == ")":
                self.i += 1
                return InnerList(items, self.params())
            items.append(self.item())
            if self.peek() not in (" ", ")"):
                raise SfError("bad inner list")

    def bare(self) -> Bare:
        c = self.peek()
        if c == '"':
            return self.string()
        if c == ":":
            end = self.s.find(":", self.i + 1)
            if end < 0:
                raise SfError("unterminated byte sequence")
            b64 = self.s[self.i + 1:end]
            if not _B64.fullmatch(b64):
                raise SfError("bad byte sequence")
            self.i = end + 1
            try:
                return base64.b64decode(b64 + "=" * (-len(b64) % 4), validate=True)
            except binascii.Error:
                raise SfError("bad byte sequence") from None
        if c == "?":
            b = self.s[self.i:self.i + 2]
            if b not in ("?0", "?1"):
                raise SfError("bad boolean")
            self.i += 2
            return b == "?1"
        if c == "-" or "0" <= c <= "9":
            n = self._match(_NUMBER, "number")
            return float(n) if "." in n else int(n)
        return Token(self._match(_TOKEN, "item"))

    def string(self) -> str:
        out = []
        self.i += 1
        while True:
            if self.done():
                raise SfError("unterminated string")
            c = self.s[self.i]
            self.i += 1
            if c == '"':
                return "".join(out)
            if c == "\\":
                n = self.peek()
                if n not in ('"', "\\"):
                    raise SfError("bad escape")
                self.i += 1
                out.append(n)
            elif not " " <= c <= "~":
                raise SfError("bad string character")
            else:
                out.append(c)


def serialize_bare(v: Bare) -> str:
    """The canonical serialization of a bare item (RFC 8941 section 4.1)."""
    if isinstance(v, bool):
        return "?1" if v else "?0"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, Token):
        return v.value
    raise SfError("byte sequences are not serialized here")


def serialize_params(params: Params) -> str:
    return "".join(f";{k}" if v is True else f";{k}={serialize_bare(v)}" for k, v in params)
