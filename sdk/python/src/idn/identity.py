"""Agent identities in the idn CLI's format and place, and signing under the
idn-rfc9421-v1 profile (docs/profile.md in the idn repository)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ._rules import encode_subject, validate_name, validate_namespace, validate_nonce, validate_subject

PROFILE = "idn-rfc9421-v1"

_KNOWN_FIELDS = ("version", "namespace", "did", "keyId", "publicKey", "privateKey", "certificate", "createdAt", "updatedAt")
_OWS = " \t"
_COMPONENTS = '"@method" "@target-uri" "idn-namespace" "idn-subject" "idn-agent-key" "idn-agent-cert"'
# MCP's routing headers, which a signature with a body covers last when sent.
_MCP_ROUTING = ("mcp-method", "mcp-name")
_COMPONENTS_BODY = '"@method" "@target-uri" "content-digest" "idn-namespace" "idn-subject" "idn-agent-key" "idn-agent-cert"'


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")


def _unb64(s: str) -> bytes:
    s = s.rstrip("=").replace("-", "+").replace("_", "/")
    return base64.b64decode(s + "=" * (-len(s) % 4), validate=True)


def _rfc3339(t: datetime) -> str:
    return t.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(s: Any) -> datetime:
    if not isinstance(s, str):
        raise ValueError("idn: createdAt and updatedAt must be RFC 3339")
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def did(namespace: str) -> str:
    """The DID of a namespace, "did:idn:<namespace>"."""
    return "did:idn:" + namespace


def certificate_canonical_text(cert: Mapping[str, Any]) -> str:
    """The lines a certificate proof signs."""
    lines = [
        "idn-certificate-v1",
        "namespace:" + cert["namespace"],
        "did:" + cert["did"],
        "key-id:" + cert["keyId"],
        "public-key:" + cert["publicKey"],
        "issued-at:" + cert["issuedAt"],
        "expires-at:" + (cert.get("expiresAt") or ""),
    ]
    if cert.get("name"):
        lines.append("name:" + cert["name"])
    return "\n".join(lines)


def _ordered_certificate(cert: Mapping[str, Any]) -> dict:
    out = {k: cert[k] for k in ("version", "namespace", "did", "keyId", "publicKey", "issuedAt")}
    out["expiresAt"] = cert.get("expiresAt")
    if cert.get("name"):
        out["name"] = cert["name"]
    out["proof"] = {"alg": cert["proof"]["alg"], "sig": cert["proof"]["sig"]}
    return out


def encode_certificate_header(cert: Mapping[str, Any]) -> str:
    """The idn-agent-cert header: base64url, unpadded, of the compact certificate JSON."""
    js = json.dumps(_ordered_certificate(cert), ensure_ascii=False, separators=(",", ":"))
    return _b64url(js.encode("utf-8"))


def verify_certificate(cert: Mapping[str, Any]) -> None:
    """Raise ValueError unless the certificate is consistent and its proof verifies."""
    try:
        if cert.get("version") != 1:
            raise ValueError("idn: certificate version must be 1")
        validate_namespace(cert["namespace"])
        d = did(cert["namespace"])
        key_id = cert["keyId"]
        if cert["did"] != d or not key_id.startswith(d + "#") or len(key_id) == len(d) + 1:
            raise ValueError("idn: certificate did or keyId does not match its namespace")
        if cert.get("name"):  # "" is no name, as in the Go implementation
            validate_name(cert["name"])
        if not cert["publicKey"].startswith("ed25519:") or cert["proof"]["alg"] != "ed25519":
            raise ValueError("idn: certificate is not ed25519")
        pub = _unb64(cert["publicKey"][8:])
        sig = _unb64(cert["proof"]["sig"])
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        if isinstance(e, ValueError) and str(e).startswith("idn:"):
            raise
        raise ValueError(f"idn: malformed certificate ({e})") from None
    if len(pub) != 32 or len(sig) != 64:
        raise ValueError("idn: certificate key or proof has the wrong length")
    try:
        Ed25519PublicKey.from_public_bytes(pub).verify(sig, certificate_canonical_text(cert).encode("utf-8"))
    except InvalidSignature:
        raise ValueError("idn: certificate proof does not verify") from None


def idn_home(home: str | os.PathLike | None = None) -> Path:
    """The idn home: home, else $IDN_HOME, else ~/.idn."""
    if home:
        return Path(home)
    env = os.environ.get("IDN_HOME")
    return Path(env) if env else Path.home() / ".idn"


def _key_id(namespace: str, pub: bytes) -> str:
    return f"{did(namespace)}#ed25519-{hashlib.sha256(pub).digest()[:8].hex()}"


def _issue(namespace: str, name: str | None, sign: Callable[[bytes], bytes], pub: bytes, issued_at: datetime, expires_at: str | None) -> dict:
    validate_namespace(namespace)
    if name:
        validate_name(name)
    cert: dict[str, Any] = {
        "version": 1,
        "namespace": namespace,
        "did": did(namespace),
        "keyId": _key_id(namespace, pub),
        "publicKey": "ed25519:" + _b64(pub),
        "issuedAt": _rfc3339(issued_at),
        "expiresAt": expires_at,
    }
    if name:
        cert["name"] = name
    cert["proof"] = {"alg": "ed25519", "sig": _b64url(bytes(sign(certificate_canonical_text(cert).encode("utf-8"))))}
    return cert


class Identity:
    """An agent identity: a namespace, an Ed25519 key and a self-signed
    certificate, stored as the idn CLI stores it, so ``idn init`` and this
    SDK share one identity."""

    def __init__(self, namespace: str, seed: bytes, certificate: dict, created_at: datetime, updated_at: datetime, extra: dict | None = None):
        """Use create, from_seed, load or from_record."""
        validate_namespace(namespace)
        self.namespace = namespace
        self._seed = bytes(seed)
        key = Ed25519PrivateKey.from_private_bytes(self._seed)
        self._sign: Callable[[bytes], bytes] = key.sign
        self._pub = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.public_key = "ed25519:" + _b64(self._pub)
        self.created_at = created_at
        self.updated_at = updated_at
        self._extra = dict(extra or {})
        self._set_certificate(certificate)

    def _set_certificate(self, cert: dict) -> None:
        self._cert = cert
        self._cert_header = encode_certificate_header(cert)
        self._identity_lines = f'"idn-agent-key": {self.public_key}\n"idn-agent-cert": {self._cert_header}\n'
        self._tail = self._identity_lines + '"@signature-params": ('
        self._keyid_param = f';keyid="{cert["keyId"]}";alg="ed25519";nonce="'

    @classmethod
    def create(cls, namespace: str, name: str | None = None, issued_at: datetime | None = None) -> "Identity":
        """A new identity with a fresh key; its certificate is issued now (or at issued_at)."""
        return cls.from_seed(namespace, secrets.token_bytes(32), name=name, issued_at=issued_at)

    @classmethod
    def from_seed(cls, namespace: str, seed: bytes, name: str | None = None, issued_at: datetime | None = None) -> "Identity":
        """An identity for a 32-byte Ed25519 seed (the record's privateKey)."""
        if not isinstance(seed, (bytes, bytearray)) or len(seed) != 32:
            raise ValueError("idn: an Ed25519 seed is 32 bytes")
        issued = (issued_at or datetime.now(timezone.utc)).replace(microsecond=0)
        key = Ed25519PrivateKey.from_private_bytes(bytes(seed))
        pub = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        cert = _issue(namespace, name, key.sign, pub, issued, None)
        return cls(namespace, bytes(seed), cert, issued, issued)

    @classmethod
    def with_signer(cls, namespace: str, public_key: bytes, sign: Callable[[bytes], bytes], *, name: str | None = None,
                    issued_at: datetime | None = None, certificate: dict | None = None) -> "Identity":
        """An identity whose private key never enters this process.

        sign(data) returns the Ed25519 signature, made wherever the key lives
        (an OS keychain, a hardware token, a cloud KMS). Without certificate,
        a new one is issued through sign; with one (kept from earlier, e.g.
        identity.certificate), it is checked against public_key and reused.
        Such an identity signs and renames but has no record to save.
        """
        validate_namespace(namespace)
        if not isinstance(public_key, (bytes, bytearray)) or len(public_key) != 32:
            raise ValueError("idn: an Ed25519 public key is 32 bytes")
        pub = bytes(public_key)
        if certificate is None:
            issued = (issued_at or datetime.now(timezone.utc)).replace(microsecond=0)
            certificate = _issue(namespace, name, sign, pub, issued, None)
        verify_certificate(certificate)  # also proves that sign signs with public_key
        if certificate["namespace"] != namespace or certificate["publicKey"] != "ed25519:" + _b64(pub):
            raise ValueError("idn: certificate is not for this namespace and key")
        self = cls.__new__(cls)
        self.namespace = namespace
        self._seed = None
        self._sign = sign
        self._pub = pub
        self.public_key = "ed25519:" + _b64(pub)
        self.created_at = self.updated_at = _parse_time(certificate["issuedAt"])
        self._extra = {}
        self._set_certificate(_ordered_certificate(certificate))
        return self

    @property
    def did(self) -> str:
        return did(self.namespace)

    @property
    def key_id(self) -> str:
        return self._cert["keyId"]

    @property
    def fingerprint(self) -> str:
        """The key's fingerprint, "ed25519-<16 hex>": the key id's fragment, as owners see it on the claims page."""
        return self.key_id.split("#", 1)[1]

    @property
    def name(self) -> str | None:
        """The display name the certificate carries, or None."""
        return self._cert.get("name")

    @property
    def certificate(self) -> dict:
        """A copy of the certificate."""
        return json.loads(json.dumps(_ordered_certificate(self._cert)))

    @property
    def certificate_header(self) -> str:
        return self._cert_header

    def rename(self, name: str | None, now: datetime | None = None) -> None:
        """Give the identity a new display name (None removes it) with a new
        certificate for the same key, so approvals of the key stand. save() writes it."""
        now = (now or datetime.now(timezone.utc)).replace(microsecond=0)
        self._set_certificate(_issue(self.namespace, name, self._sign, self._pub, now, self._cert.get("expiresAt")))
        self.updated_at = now

    # --- the record -----------------------------------------------------

    def to_record(self) -> str:
        """The identity file's JSON text, with any unknown fields it was loaded with."""
        if self._seed is None:
            raise ValueError("idn: an identity with an external signer has no record; "
                             "keep identity.certificate and pass it to Identity.with_signer")
        rec: dict[str, Any] = {
            "version": 1,
            "namespace": self.namespace,
            "did": self.did,
            "keyId": self.key_id,
            "publicKey": self.public_key,
            "privateKey": _b64(self._seed),
            "certificate": _ordered_certificate(self._cert),
            "createdAt": _rfc3339(self.created_at),
            "updatedAt": _rfc3339(self.updated_at),
        }
        for k in sorted(self._extra):
            rec[k] = self._extra[k]
        return json.dumps(rec, indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_record(cls, text: str | bytes) -> "Identity":
        """Parse an identity record, checking the key pair and the certificate. Unknown fields are kept."""
        try:
            rec = json.loads(text)
        except ValueError:
            raise ValueError("idn: identity record is not JSON") from None
        if not isinstance(rec, dict):
            raise ValueError("idn: identity record is not a JSON object")
        if rec.get("version") != 1:
            raise ValueError(f"idn: identity record version {rec.get('version')!r}, want 1")
        validate_namespace(rec.get("namespace"))
        try:
            seed = _unb64(str(rec.get("privateKey", "")))
        except ValueError:
            seed = b""
        if len(seed) != 32:
            raise ValueError("idn: privateKey must be base64 of a 32-byte seed")
        cert = rec.get("certificate")
        if not isinstance(cert, dict):
            raise ValueError("idn: identity record has no certificate")
        verify_certificate(cert)
        pub = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        public_key = "ed25519:" + _b64(pub)
        if rec.get("publicKey") != public_key:
            raise ValueError("idn: identity record publicKey does not match privateKey")
        ns = rec["namespace"]
        if cert["publicKey"] != public_key or cert["namespace"] != ns or rec.get("did") != did(ns) or rec.get("keyId") != cert["keyId"]:
            raise ValueError("idn: certificate does not match the identity record")
        created, updated = _parse_time(rec.get("createdAt")), _parse_time(rec.get("updatedAt"))
        extra = {k: v for k, v in rec.items() if k not in _KNOWN_FIELDS}
        return cls(ns, seed, cert, created, updated, extra)

    @staticmethod
    def path(namespace: str, home: str | os.PathLike | None = None) -> Path:
        """<home>/identities/<namespace>/identity.json."""
        validate_namespace(namespace)
        return idn_home(home) / "identities" / namespace / "identity.json"

    @staticmethod
    def list(home: str | os.PathLike | None = None) -> list[str]:
        """The namespaces with an identity in the idn home, sorted."""
        base = idn_home(home) / "identities"
        try:
            entries = list(base.iterdir())
        except FileNotFoundError:
            return []
        out = []
        for e in entries:
            try:
                validate_namespace(e.name)
            except ValueError:
                continue
            if e.is_dir() and (e / "identity.json").is_file():
                out.append(e.name)
        return sorted(out)

    @classmethod
    def load(cls, namespace: str | None = None, home: str | os.PathLike | None = None) -> "Identity":
        """Load namespace's identity from the idn home; without a namespace, the only one there."""
        h = idn_home(home)
        if namespace is None:
            names = cls.list(h)
            if len(names) != 1:
                if not names:
                    raise FileNotFoundError(f"idn: no identity in {h}; create one with Identity.create or 'idn init'")
                raise ValueError(f"idn: several identities in {h} ({', '.join(names)}); name one")
            namespace = names[0]
        path = cls.path(namespace, h)
        try:
            text = path.read_text("utf-8")
        except FileNotFoundError:
            raise FileNotFoundError(f"idn: no identity {namespace!r} in {h}") from None
        ident = cls.from_record(text)
        if ident.namespace != namespace:
            raise ValueError(f"idn: {path} holds namespace {ident.namespace!r}")
        return ident

    def save(self, home: str | os.PathLike | None = None) -> Path:
        """Write the identity to the idn home atomically: folders 0700, file 0600."""
        h = idn_home(home)
        path = self.path(self.namespace, h)
        for d in (h, h / "identities", path.parent):
            try:
                d.mkdir(mode=0o700)
            except FileExistsError:
                pass
        os.chmod(path.parent, 0o700)
        tmp = path.parent / f".identity-{secrets.token_hex(6)}.json"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(self.to_record())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    # --- signing --------------------------------------------------------

    def signature_base(self, method: str, url: str, body: bytes | str | None = None, *, subject: str | None = None,
                       nonce: str | None = None, created: int | float | datetime | None = None,
                       mcp: Mapping[str, str] | None = None) -> str:
        """The signature base sign() signs for the same arguments (fix nonce and created to compare)."""
        return self._build(method, url, body, subject, nonce, created, mcp)[0]

    def sign(self, method: str, url: str, body: bytes | str | None = None, *, subject: str | None = None,
             nonce: str | None = None, created: int | float | datetime | None = None,
             mcp: Mapping[str, str] | None = None) -> dict[str, str]:
        """Sign a request under the profile and return the headers to set
        (lower-case names; content-digest only with a body). url and body
        must be exactly what is sent. mcp holds MCP's routing headers as
        sent ("mcp-method", "mcp-name"; MCP 2026-07-28): a request with a
        body covers them after the profile's components, mcp-name only
        with mcp-method."""
        base, headers = self._build(method, url, body, subject, nonce, created, mcp)
        headers["signature"] = "sig1=:" + _b64(bytes(self._sign(base.encode("utf-8")))) + ":"
        return headers

    def _build(self, method, url, body, subject, nonce, created, mcp=None):
        url = str(url)
        hash_at = url.find("#")
        target = url if hash_at < 0 else url[:hash_at]
        if not (target.startswith("http://") or target.startswith("https://")):
            raise ValueError("idn: only absolute http and https URLs are signed")
        if subject is None:
            subject = self.namespace
        else:
            # HTTP drops spaces and tabs at either end of a header value.
            subject = subject.strip(_OWS)
            validate_subject(subject)
        subject_value = encode_subject(subject)
        if nonce is None:
            nonce = secrets.token_hex(16)
        else:
            validate_nonce(nonce)
        if created is None:
            created = int(time.time())
        elif isinstance(created, datetime):
            created = int(created.timestamp())
        else:
            created = int(created)
        if isinstance(body, str):
            body = body.encode("utf-8")
        headers = {
            "idn-namespace": self.namespace,
            "idn-subject": subject_value,
            "idn-agent-key": self.public_key,
            "idn-agent-cert": self._cert_header,
        }
        if body:
            digest = "sha-256=:" + _b64(hashlib.sha256(body).digest()) + ":"
            headers["content-digest"] = digest
            components, routing = _COMPONENTS_BODY, ""
            for name in _MCP_ROUTING:
                value = (mcp or {}).get(name)
                if not value:
                    break
                components += f' "{name}"'
                routing += f'"{name}": {value.strip(_OWS)}\n'
            params = f"{components});created={created}{self._keyid_param}{nonce}\""
            base = (f'"@method": {method.lower()}\n"@target-uri": {target}\n"content-digest": {digest}\n'
                    f'"idn-namespace": {self.namespace}\n"idn-subject": {subject_value}\n{self._identity_lines}'
                    f'{routing}"@signature-params": ({params}')
        else:
            params = f"{_COMPONENTS});created={created}{self._keyid_param}{nonce}\""
            base = (f'"@method": {method.lower()}\n"@target-uri": {target}\n'
                    f'"idn-namespace": {self.namespace}\n"idn-subject": {subject_value}\n{self._tail}{params}')
        headers["signature-input"] = "sig1=(" + params
        return base, headers
