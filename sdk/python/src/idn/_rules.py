"""The profile's value rules: namespace, display name, subject, nonce."""

from __future__ import annotations

import re
import unicodedata

_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{1,62}[A-Za-z0-9]")
_NONCE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{8,128}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
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


def validate_subject(subject: str) -> None:
    """Raise ValueError unless subject is 1-256 bytes without control characters."""
    if not isinstance(subject, str) or not subject or len(subject.encode()) > 256 or _CONTROL.search(subject):
        raise ValueError("idn: subject must be 1 to 256 bytes without control characters")


def validate_nonce(nonce: str) -> None:
    """Raise ValueError unless nonce is 8-128 visible ASCII characters without '"' or '\\'."""
    if not isinstance(nonce, str) or not _NONCE.fullmatch(nonce):
        raise ValueError("idn: nonce must be 8 to 128 visible ASCII characters without '\"' or '\\'")
