"""Verifying idn agents' requests in a service, without a gateway: the
profile checks of the Go identity.Verifier (docs/profile.md), a nonce
store, and WSGI and ASGI middleware."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Iterable, List, Mapping, Optional, Protocol, Tuple, Union

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ._rules import decode_subject, validate_namespace, validate_nonce, validate_subject
from ._sfv import InnerList, Item, SfError, parse_dictionary, serialize_bare, serialize_params
from .errors import MARK_HEADER
from .identity import verify_certificate

_NO_BODY = ("@method", "@target-uri", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert")
_MCP_ROUTING = ("mcp-method", "mcp-name")
_WITH_BODY = ("@method", "@target-uri", "content-digest", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert")
_IDENTITY = ("idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert")

Headers = Union[Mapping[str, Union[str, List[str]]], Iterable[Tuple[str, str]]]


class NonceStore(Protocol):
    """Remembers nonces: check records (namespace, nonce) until `until` (Unix
    seconds) and returns True, or returns False when it is already recorded
    (a replay). A store shared by every instance of a service stops replays
    across them."""

    def check(self, namespace: str, nonce: str, until: float) -> bool: ...


class VerifyError(Exception):
    """A refused request: code says why, as the gateway would say it (403)."""

    status = 403

    def __init__(self, code: str, reason: str):
        self.code = code
        self.reason = reason
        super().__init__(f"{code}: {reason}")


@dataclass(frozen=True)
class VerifiedAgent:
    """The agent whose request verified."""

    namespace: str
    subject: str  #: the decoded idn-subject
    name: Optional[str]  #: the certificate's display name
    key_id: str
    public_key: str  #: "ed25519:<base64>"
    fingerprint: str  #: "ed25519-<16 hex>", as owners see the key
    nonce: str
    created: datetime


def _lines(headers: Headers) -> dict:
    out: dict = {}
    items = headers.items() if isinstance(headers, Mapping) else headers
    for k, v in items:
        for value in (v if isinstance(v, list) else [v]):
            out.setdefault(k.lower(), []).append(value)
    return out


def _one(h: dict, name: str, missing: str) -> str:
    got = h.get(name, [])
    if not got:
        raise VerifyError(missing, f"missing {name}")
    if len(got) > 1:
        raise VerifyError("AUTH_HEADERS_INVALID", f"duplicate {name}")
    return got[0].strip(" \t")


def verify_request(method: str, url: str, headers: Headers, body: Union[bytes, str, None] = None, *,
                   nonces: NonceStore, now: Optional[float] = None, max_age: int = 300, future_skew: int = 30) -> VerifiedAgent:
    """Verify an idn agent's request under the profile.

    Checks exactly the profile's covered components, created within the
    window, the identity headers against the certificate and its proof,
    the Ed25519 signature (over the lower-cased or the as-sent method), the
    body against content-digest, and the nonce (recorded in nonces). url is
    the absolute URL the client addressed, the path and query as received.
    headers is a mapping or (name, value) pairs, so duplicates show.
    Returns the agent or raises VerifyError; approval is the caller's.
    """
    if nonces is None:
        raise VerifyError("AUTH_NONCE_INVALID", "no nonce store configured")
    h = _lines(headers)
    ns, subject_header, key_header, cert_header = (_one(h, n, "AUTH_IDENTITY_INVALID") for n in _IDENTITY)
    input_line = _one(h, "signature-input", "AUTH_HEADERS_INVALID")
    sig_line = _one(h, "signature", "AUTH_HEADERS_INVALID")
    if len(h.get("content-digest", [])) > 1:
        raise VerifyError("AUTH_HEADERS_INVALID", "duplicate content-digest")
    try:
        validate_namespace(ns)
    except ValueError:
        raise VerifyError("AUTH_IDENTITY_INVALID", "bad idn-namespace") from None
    try:
        subject = decode_subject(subject_header)
        validate_subject(subject)
    except ValueError:
        raise VerifyError("AUTH_IDENTITY_INVALID", "bad idn-subject") from None
    body = body.encode("utf-8") if isinstance(body, str) else (body or b"")

    try:
        inputs, sigs = parse_dictionary(input_line), parse_dictionary(sig_line)
    except SfError:
        raise VerifyError("AUTH_HEADERS_INVALID", "signature headers are not structured dictionaries") from None
    if len(inputs) != 1 or len(sigs) != 1:
        raise VerifyError("AUTH_HEADERS_INVALID", "more than one signature")
    label, sig_list = next(iter(inputs.items()))
    sig_member = sigs.get(label)
    if not isinstance(sig_list, InnerList):
        raise VerifyError("AUTH_HEADERS_INVALID", "signature-input member is not an inner list")
    if not isinstance(sig_member, Item) or not isinstance(sig_member.value, bytes):
        raise VerifyError("AUTH_HEADERS_INVALID", "signature member is not a byte sequence")

    components = [it.value for it in sig_list.items]
    if any(not isinstance(it.value, str) or it.params for it in sig_list.items):
        raise VerifyError("AUTH_SIGNED_COMPONENTS_INVALID", "components must be plain names")
    want = _WITH_BODY if body else _NO_BODY
    # A body's signature may end with MCP's routing headers.
    routed = 0
    if body:
        routed = next((n for n in (2, 1) if len(components) > n and tuple(components[-n:]) == _MCP_ROUTING[:n]), 0)
    profile = components[:len(components) - routed]
    if len(profile) != len(want) or set(profile) != set(want):
        raise VerifyError("AUTH_SIGNED_COMPONENTS_INVALID",
                          f"covered components are not the profile's set for a request {'with' if body else 'without'} a body")
    params = dict(sig_list.params)
    created, expires = params.get("created"), params.get("expires")
    keyid, alg, nonce = params.get("keyid"), params.get("alg"), params.get("nonce")
    if alg is not None and alg != "ed25519":
        raise VerifyError("AUTH_SIGNATURE_INVALID", "alg is not ed25519")
    if not isinstance(keyid, str) or not keyid:
        raise VerifyError("AUTH_IDENTITY_INVALID", "missing keyid")
    if not isinstance(nonce, str):
        raise VerifyError("AUTH_NONCE_INVALID", "missing nonce")
    try:
        validate_nonce(nonce)
    except ValueError:
        raise VerifyError("AUTH_NONCE_INVALID", "bad nonce") from None
    if not isinstance(created, int) or isinstance(created, bool):
        raise VerifyError("AUTH_SIGNATURE_INVALID", "missing created")
    if expires is not None and (not isinstance(expires, int) or isinstance(expires, bool)):
        raise VerifyError("AUTH_SIGNATURE_INVALID", "bad expires")
    t = time.time() if now is None else now
    if created < t - max_age:
        raise VerifyError("AUTH_SIGNATURE_INVALID", "signature is too old")
    if created > t + future_skew:
        raise VerifyError("AUTH_SIGNATURE_INVALID", "signature is created in the future")
    if expires is not None and t > expires:
        raise VerifyError("AUTH_SIGNATURE_INVALID", "signature has expired")

    try:
        raw = cert_header.rstrip("=")
        cert = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        verify_certificate(cert)
    except (ValueError, TypeError, binascii.Error):
        raise VerifyError("AUTH_IDENTITY_INVALID", "bad idn-agent-cert") from None
    if cert["namespace"] != ns or cert["publicKey"] != key_header or cert["keyId"] != keyid:
        raise VerifyError("AUTH_IDENTITY_INVALID", "certificate does not match the request")
    try:
        expired = bool(cert.get("expiresAt")) and _unix(cert["expiresAt"]) <= t
        early = _unix(cert["issuedAt"]) > t + future_skew
    except (ValueError, TypeError):
        raise VerifyError("AUTH_IDENTITY_INVALID", "certificate times are not RFC 3339") from None
    if expired or early:
        raise VerifyError("AUTH_IDENTITY_INVALID", "certificate is not valid now")

    hash_at = url.find("#")
    values = {"@target-uri": url if hash_at < 0 else url[:hash_at], "idn-namespace": ns, "idn-subject": subject_header,
              "idn-agent-key": key_header, "idn-agent-cert": cert_header}
    if body:
        values["content-digest"] = (h.get("content-digest") or [""])[0].strip(" \t")
    for name in _MCP_ROUTING[:routed]:
        values[name] = _one(h, name, "AUTH_HEADERS_INVALID")
    params_line = "(" + " ".join(serialize_bare(c) for c in components) + ")" + serialize_params(sig_list.params)
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(key_header[8:]))
    for m in dict.fromkeys((method.lower(), method)):
        lines = [f'"{c}": {m if c == "@method" else values[c]}' for c in components]
        base = "\n".join(lines + [f'"@signature-params": {params_line}'])
        try:
            key.verify(sig_member.value, base.encode("utf-8"))
            break
        except InvalidSignature:
            continue
    else:
        raise VerifyError("AUTH_SIGNATURE_INVALID", "signature does not verify")
    if body:
        _check_digest(values["content-digest"], body)

    if not nonces.check(ns, nonce, created + max_age):
        raise VerifyError("AUTH_REPLAY_DETECTED", "nonce already seen")
    return VerifiedAgent(namespace=ns, subject=subject, name=cert.get("name") or None, key_id=keyid, public_key=key_header,
                         fingerprint=keyid.split("#", 1)[1], nonce=nonce, created=datetime.fromtimestamp(created, timezone.utc))


def _unix(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def _check_digest(field: str, body: bytes) -> None:
    try:
        d = parse_dictionary(field)
    except SfError:
        raise VerifyError("AUTH_SIGNATURE_INVALID", "content-digest is not a structured dictionary") from None
    checked = 0
    for alg, fn in (("sha-256", hashlib.sha256), ("sha-512", hashlib.sha512)):
        m = d.get(alg)
        if m is None:
            continue
        if not isinstance(m, Item) or not isinstance(m.value, bytes):
            raise VerifyError("AUTH_SIGNATURE_INVALID", "content-digest member is not a byte sequence")
        if not hmac.compare_digest(fn(body).digest(), m.value):
            raise VerifyError("AUTH_SIGNATURE_INVALID", "content-digest does not match the body")
        checked += 1
    if not checked:
        raise VerifyError("AUTH_SIGNATURE_INVALID", "content-digest has no sha-256 or sha-512")


class MemoryNonceStore:
    """A NonceStore in this process's memory: entries leave when their time
    passes; when max_entries are held, check raises (refuse, never forget a
    nonce early: a flood can deny service but never make a replay pass)."""

    def __init__(self, max_entries: int = 1_000_000, clock: Callable[[], float] = time.time):
        self.max_entries = max_entries
        self._clock = clock
        self._seen: dict = {}
        self._lock = threading.Lock()

    def check(self, namespace: str, nonce: str, until: float) -> bool:
        t = self._clock()
        key = (namespace, nonce)
        with self._lock:
            if self._seen.get(key, t) > t:
                return False
            if len(self._seen) >= self.max_entries:
                self._seen = {k: u for k, u in self._seen.items() if u > t}
                if len(self._seen) >= self.max_entries:
                    raise RuntimeError("idn: nonce store full")
            self._seen[key] = until
            return True


@dataclass(frozen=True)
class ClaimDecision:
    """What the control plane says of an agent's approval for a service:
    authorized, or the code to refuse with (AUTH_CLAIM_REQUIRED,
    AUTH_CLAIM_REJECTED, AUTH_CLAIM_REVOKED) and the claim."""

    authorized: bool
    code: Optional[str] = None
    claim_id: Optional[str] = None
    claim_status: Optional[str] = None


class ControlPlaneClaims:
    """The control plane's claim check, as the gateway makes it (signed as
    identity, the service's own, with the service's API key): an approved
    (namespace, key, service) passes; a rejected or revoked claim refuses;
    otherwise a claim is filed (or the pending one named) for the
    namespace's owner to approve, and the agent is told AUTH_CLAIM_REQUIRED.
    Raises when the control plane cannot answer. Uses urllib, so it needs
    neither httpx nor requests."""

    def __init__(self, control_plane: str, api_key: str, service: str, identity: Any, timeout: float = 10):
        self.base = control_plane.rstrip("/")
        self.api_key, self.service, self.identity, self.timeout = api_key, service, identity, timeout

    def _call(self, method: str, path: str, payload: Optional[dict] = None) -> dict:
        import urllib.request

        url = self.base + path
        body = json.dumps(payload).encode() if payload is not None else None
        headers = {"authorization": f"Bearer {self.api_key}", **self.identity.sign(method, url, body)}
        if body is not None:
            headers["content-type"] = "application/json"
        with urllib.request.urlopen(urllib.request.Request(url, data=body, method=method, headers=headers), timeout=self.timeout) as r:
            return json.loads(r.read())

    def __call__(self, agent: VerifiedAgent) -> ClaimDecision:
        from urllib.parse import urlencode

        q = urlencode({"namespace": agent.namespace, "public_key": agent.public_key, "service": self.service})
        v = self._call("GET", f"/v1/verify?{q}")
        if v.get("authorized") is True:
            return ClaimDecision(True, claim_id=v.get("claim_id"))
        claim = {"namespace": agent.namespace, "public_key": agent.public_key, "service": self.service,
                 "subject": agent.subject, "nonce": agent.nonce}
        if agent.name:
            claim["agent_name"] = agent.name
        filed = self._call("POST", "/v1/claims", claim)
        status, claim_id = str(filed.get("status", "")), filed.get("claim_id")
        if status == "approved":
            return ClaimDecision(True, claim_id=claim_id)
        code = {"rejected": "AUTH_CLAIM_REJECTED", "revoked": "AUTH_CLAIM_REVOKED"}.get(status, "AUTH_CLAIM_REQUIRED")
        return ClaimDecision(False, code, claim_id, status)


_Refusal = Tuple[int, List[Tuple[str, str]], bytes]
_REASONS = {403: "403 Forbidden", 503: "503 Service Unavailable"}


def _refusal(status: int, code: str, error: str, extra: Optional[dict] = None, headers: Optional[list] = None) -> _Refusal:
    body = json.dumps({"error": error, "code": code, "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       **(extra or {})}).encode()
    return status, [("content-type", "application/json"), (MARK_HEADER, code), ("content-length", str(len(body)))] + (headers or []), body


def _verified(method: str, url: str, headers: list, body: bytes, nonces: NonceStore, verify: dict) -> Union[VerifiedAgent, _Refusal]:
    try:
        return verify_request(method, url, headers, body, nonces=nonces, **verify)
    except VerifyError as e:
        return _refusal(e.status, e.code, e.reason)


def _decided(agent: VerifiedAgent, decide: Callable[[], ClaimDecision]) -> Union[VerifiedAgent, _Refusal]:
    try:
        d = decide()
    except Exception:  # the control plane is down or answered an error: the agent may retry
        return _refusal(503, "AUTH_CLAIMS_UNAVAILABLE", "the control plane cannot be reached to check the claim",
                        headers=[("retry-after", "2")])
    if d.authorized:
        return agent
    extra = {k: v for k, v in (("claim_id", d.claim_id), ("claim_status", d.claim_status)) if v}
    msg = ("this agent is not approved for this service; the namespace owner must approve the claim"
           if d.code == "AUTH_CLAIM_REQUIRED" else "the namespace owner refused this agent's claim")
    return _refusal(403, d.code or "AUTH_CLAIM_REQUIRED", msg, extra)


class IdnWSGIMiddleware:
    """WSGI middleware: runs app only for a verified idn agent (in
    environ["idn.agent"]) and, with claims (ControlPlaneClaims), an approved
    one; others get the gateway's envelope, marked with Idn-Error.
    url(environ) overrides the URL the client addressed when a proxy
    changed it. The body is read and handed on."""

    def __init__(self, app: Callable, *, nonces: NonceStore, claims: Optional[Callable[[VerifiedAgent], ClaimDecision]] = None,
                 url: Optional[Callable[[dict], str]] = None, **verify: Any):
        self.app, self.nonces, self.claims, self.url, self.verify = app, nonces, claims, url, verify

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        import io

        n = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(n) if n > 0 else b""
        environ["wsgi.input"] = io.BytesIO(body)
        headers = [(k[5:].replace("_", "-").lower(), v) for k, v in environ.items() if k.startswith("HTTP_")]
        if environ.get("CONTENT_TYPE"):
            headers.append(("content-type", environ["CONTENT_TYPE"]))
        url = self.url(environ) if self.url else _wsgi_url(environ)
        got = _verified(environ["REQUEST_METHOD"], url, headers, body, self.nonces, self.verify)
        if isinstance(got, VerifiedAgent) and self.claims is not None:
            agent = got
            got = _decided(agent, lambda: self.claims(agent))
        if not isinstance(got, VerifiedAgent):
            status, hdrs, payload = got
            start_response(_REASONS[status], hdrs)
            return [payload]
        environ["idn.agent"] = got
        return self.app(environ, start_response)


def _wsgi_url(environ: dict) -> str:
    host = environ.get("HTTP_HOST") or f"{environ['SERVER_NAME']}:{environ['SERVER_PORT']}"
    # REQUEST_URI, where the server offers it, is the target as received.
    target = environ.get("REQUEST_URI") or (environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "") +
                                           ("?" + environ["QUERY_STRING"] if environ.get("QUERY_STRING") else ""))
    return f"{environ['wsgi.url_scheme']}://{host}{target}"


class IdnASGIMiddleware:
    """ASGI middleware for HTTP: runs app only for a verified idn agent (in
    scope["idn.agent"]) and, with claims (ControlPlaneClaims, run in a
    thread), an approved one; others get the gateway's envelope, marked
    with Idn-Error. url(scope) overrides the URL the client addressed. The
    body is read and replayed to app."""

    def __init__(self, app: Callable, *, nonces: NonceStore, claims: Optional[Callable[[VerifiedAgent], ClaimDecision]] = None,
                 url: Optional[Callable[[dict], str]] = None, **verify: Any):
        self.app, self.nonces, self.claims, self.url, self.verify = app, nonces, claims, url, verify

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body"):
                break
        body = b"".join(chunks)
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        url = self.url(scope) if self.url else _asgi_url(scope, headers)
        got = _verified(scope["method"], url, headers, body, self.nonces, self.verify)
        if isinstance(got, VerifiedAgent) and self.claims is not None:
            agent, claims = got, self.claims
            got = await asyncio.to_thread(_decided, agent, lambda: claims(agent))
        if not isinstance(got, VerifiedAgent):
            status, hdrs, payload = got
            await send({"type": "http.response.start", "status": status, "headers": [(k.encode(), v.encode()) for k, v in hdrs]})
            await send({"type": "http.response.body", "body": payload})
            return
        scope = {**scope, "idn.agent": got}
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _asgi_url(scope: dict, headers: List[Tuple[str, str]]) -> str:
    host = next((v for k, v in headers if k.lower() == "host"), None)
    if host is None:
        server = scope.get("server") or ("localhost", None)
        host = server[0] if server[1] is None else f"{server[0]}:{server[1]}"
    target = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
    if scope.get("query_string"):
        target += "?" + scope["query_string"].decode("latin-1")
    return f"{scope.get('scheme', 'http')}://{host}{target}"
