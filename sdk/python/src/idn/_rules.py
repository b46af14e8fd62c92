"""The profile's value rules: namespace, display name, subject, nonce."""

from __future__ import annotations

import re
import unicodedata

_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{1,62}[A-Za-z0-9]")
_NONCE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{8,128}")
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")
_LOWER_HEX2 = re.compile(r"[0-9a-f]{2}")
_PRINTABLE_CATEGORIES = ("L", "M", "N", "P", "S")


def validate_namespace(ns: str) -> None:
    """Raise ValueError unless ns is 3-64 characters of a-z A-Z 0-9 -, alphanumeric at both ends."""
    if not isinstance(ns, str) or not _NAMESPACE.fullmatch(ns):
        raise ValueError(f"idn: invalid namespace {ns!r}: use 3-64 characters of a-z, A-Z, 0-9 and inner hyphens")


# Printable code points that still render as nothing (Unicode's
# Other_Default_Ignorable_Code_Point), which the servers refuse too.
_RENDERS_AS_NOTHING = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x2065, 0x2065), (0x3164, 0x3164),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0000), (0xE0002, 0xE001F),
    (0xE0080, 0xE00FF), (0xE01F0, 0xE0FFF),
)


def _renders_as_nothing(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _RENDERS_AS_NOTHING)


def validate_name(name: str) -> None:
    """Raise ValueError unless name can be an agent's display name.

    1-64 characters, each printable (a letter, mark, number, punctuation,
    symbol or the ASCII space: no control, format or invisible
    characters), no space at either end.
    """
    if not isinstance(name, str) or not 1 <= len(name) <= 64:
        raise ValueError("idn: invalid agent name: must be 1 to 64 characters")
    for ch in name:
        if ch != " " and (unicodedata.category(ch)[0] not in _PRINTABLE_CATEGORIES or _renders_as_nothing(ord(ch))):
            raise ValueError(f"idn: invalid agent name: contains the invisible or control character U+{ord(ch):04X}")
    if name[0] == " " or name[-1] == " ":
        raise ValueError("idn: invalid agent name: starts or ends with a space")


def _printable(ch: str) -> bool:
    return ch == " " or (unicodedata.category(ch)[0] in _PRINTABLE_CATEGORIES and not _renders_as_nothing(ord(ch)))


def validate_subject(subject: str) -> None:
    """Raise ValueError unless subject is 1-256 bytes of UTF-8, each character
    printable as in validate_name (the owner reads it beside Approve)."""
    if (not isinstance(subject, str) or not subject or len(subject.encode("utf-8", "surrogatepass")) > 256
            or not all(_printable(ch) for ch in subject)):
        raise ValueError("idn: subject must be 1 to 256 bytes of printable characters (no control or invisible ones)")


def encode_subject(subject: str) -> str:
    """The idn-subject header value that carries subject (docs/profile.md).

    The subject itself when it is printable ASCII and does not begin with
    '%"', else an RFC 9651 Display String: '%"..."' with '%', '"' and every
    byte outside printable ASCII as lower-case %xx of its UTF-8.
    """
    if not subject.startswith('%"') and _PRINTABLE_ASCII.fullmatch(subject):
        return subject
    out = ['%"']
    for b in subject.encode("utf-8"):
        out.append(f"%{b:02x}" if b in (0x25, 0x22) or b < 0x20 or b > 0x7E else chr(b))
    out.append('"')
    return "".join(out)


def decode_subject(value: str) -> str:
    """The subject an idn-subject header value carries.

    A value that begins with '%"' is read strictly as an RFC 9651 Display
    String (lower-case hex, UTF-8); any other value is the subject. Raises
    ValueError on a bad one.
    """
    if not value.startswith('%"'):
        return value
    if len(value) < 3 or not value.endswith('"'):
        raise ValueError("idn: idn-subject is not a valid RFC 9651 display string")
    inner, out, i = value[2:-1], bytearray(), 0
    while i < len(inner):
        c = inner[i]
        if c == "%":
            h = inner[i + 1:i + 3]
            if not _LOWER_HEX2.fullmatch(h):
                raise ValueError("idn: idn-subject is not a valid RFC 9651 display string")
            out.append(int(h, 16))
            i += 3
            continue
        if c == '"' or not " " <= c <= "~":
            raise ValueError("idn: idn-subject is not a valid RFC 9651 display string")
        out.append(ord(c))
        i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("idn: idn-subject is not a valid RFC 9651 display string") from None


def validate_nonce(nonce: str) -> None:
    """Raise ValueError unless nonce is 8-128 visible ASCII characters without '"' or '\\'."""
    if not isinstance(nonce, str) or not _NONCE.fullmatch(nonce):
        raise ValueError("idn: nonce must be 8 to 128 visible ASCII characters without '\"' or '\\'")
