"""The error envelope both idn servers answer with, as a typed error, and
waiting for an owner's approval."""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import hashlib
import math
import re
import time
from typing import Any, Awaitable, Callable, Optional

CLAIM_REQUIRED = "AUTH_CLAIM_REQUIRED"
#: The code of the answer that holds a call for the owner's passkey approval.
ACTION_APPROVAL_REQUIRED = "AUTH_ACTION_APPROVAL_REQUIRED"

#: The response header with which idn servers mark their own envelopes (its value is the code).
MARK_HEADER = "idn-error"

# Codes that clear by themselves: the waits retry them too.
_TRANSIENT = frozenset({"AUTH_CLAIMS_UNAVAILABLE", "AUTH_REPLAY_DETECTED", "NONCE_REPLAY"})
# Codes, and claim statuses, after which waiting cannot help: the owner said no.
_REFUSED = frozenset({"AUTH_CLAIM_REJECTED", "AUTH_CLAIM_REVOKED", "AUTH_ACTION_DENIED"})
_REFUSED_STATUS = frozenset({"rejected", "revoked"})

_DELTA_SECONDS = re.compile(r"[0-9]+")  # ASCII only: "²".isdigit() is True
_HTTP_DATE = re.compile(r"[A-Za-z]{3}, [0-9]{2} [A-Za-z]{3} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT")


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[int]:
    """Seconds a Retry-After value asks for: delta-seconds (ASCII digits only)
    or an HTTP date (seconds from now, at least 0); None for anything else."""
    if value is None:
        return None
    v = value.strip()
    if _DELTA_SECONDS.fullmatch(v):
        return int(v)
    if _HTTP_DATE.fullmatch(v):
        try:
            at = email.utils.parsedate_to_datetime(v).timestamp()
        except (TypeError, ValueError, OverflowError):
            return None
        return max(0, math.ceil(at - (time.time() if now is None else now)))
    return None


def key_fingerprint(public_key: Optional[str]) -> Optional[str]:
    """The fingerprint of an "ed25519:<base64>" key, "ed25519-<16 hex>", as
    the owner's claims page shows it; None when it is not such a key."""
    if not public_key or not public_key.startswith("ed25519:"):
        return None
    try:
        raw = base64.b64decode(public_key[8:], validate=True)
    except (binascii.Error, ValueError):
        return None
    return "ed25519-" + hashlib.sha256(raw).digest()[:8].hex() if len(raw) == 32 else None


class IdnError(Exception):
    """An error answer of a gateway or control plane: the JSON envelope
    {"error","code","request_id","timestamp",...} with the HTTP status.

    Only an envelope the idn server marked as its own (the Idn-Error header
    naming the same code) gives its code and claim: an upstream behind the
    gateway can answer any body, and a forged AUTH_CLAIM_REQUIRED with
    another key's claim id must not reach the owner. Anything else reads as
    code "HTTP_<status>", with the body still in envelope."""

    def __init__(self, status: int, envelope: Optional[dict], headers: Any = None, key_fingerprint: Optional[str] = None):
        def s(k: str) -> Optional[str]:
            v = (envelope or {}).get(k)
            return v if isinstance(v, str) else None

        def h(k: str) -> Optional[str]:
            return headers.get(k) if headers is not None else None

        claimed = s("code")
        #: True when an idn server wrote the envelope (Idn-Error names its code).
        self.from_idn: bool = claimed is not None and h(MARK_HEADER) == claimed
        #: The stable code, e.g. "AUTH_CLAIM_REQUIRED"; "HTTP_<status>" when the answer is not an idn envelope.
        self.code: str = claimed if self.from_idn else f"HTTP_{status}"
        self.status: int = status
        #: The request id (the envelope's request_id or the X-Request-Id header).
        self.request_id: Optional[str] = (s("request_id") if self.from_idn else None) or h("x-request-id")
        #: The claim the gateway filed (AUTH_CLAIM_REQUIRED), and its status.
        self.claim_id: Optional[str] = s("claim_id") if self.from_idn else None
        self.claim_status: Optional[str] = s("claim_status") if self.from_idn else None
        #: The action the gateway filed (AUTH_ACTION_APPROVAL_REQUIRED, AUTH_ACTION_DENIED), and its expiry (RFC 3339).
        self.action_id: Optional[str] = s("action_id") if self.from_idn else None
        self.expires_at: Optional[str] = s("expires_at") if self.from_idn else None
        #: Seconds from the Retry-After header (delta-seconds or an HTTP date), if any.
        self.retry_after: Optional[int] = parse_retry_after(h("retry-after"))
        #: The fingerprint of the key that signed the refused request,
        #: "ed25519-<16 hex>", as the owner's claims page shows it; an owner
        #: approves a claim only when they match.
        self.key_fingerprint: Optional[str] = key_fingerprint
        #: The decoded JSON body (None when it was not a JSON object).
        self.envelope: Optional[dict] = envelope
        message = (s("error") or "") if self.from_idn else "not an idn error envelope"
        super().__init__(f"{self.code} ({status}): {message}")

    @property
    def claim_required(self) -> bool:
        """True when the agent waits for an owner's approval (a claim was filed)."""
        return self.code == CLAIM_REQUIRED

    @property
    def action_required(self) -> bool:
        """True when the call waits for the owner's passkey approval of this very call."""
        return self.code == ACTION_APPROVAL_REQUIRED

    @property
    def claim_refused(self) -> bool:
        """True when the owner rejected or revoked the claim, or denied the action: waiting cannot help."""
        return self.code in _REFUSED or (self.claim_required and self.claim_status in _REFUSED_STATUS)


def read_error(response: Any) -> Optional[IdnError]:
    """An httpx or requests response as an IdnError; None for status < 400."""
    status = response.status_code
    if status < 400:
        return None
    try:
        v = response.json()
        envelope = v if isinstance(v, dict) else None
    except Exception:  # not JSON, whatever the client's exception type
        envelope = None
    try:
        request = response.request  # httpx raises when the response has none
    except Exception:
        request = None
    headers = getattr(request, "headers", None)
    signer = key_fingerprint(headers.get("idn-agent-key")) if headers is not None else None
    return IdnError(status, envelope, response.headers, signer)


def raise_for_error(response: Any) -> Any:
    """Return the response when it is not an error, else raise its IdnError."""
    err = read_error(response)
    if err is not None:
        raise err
    return response


def _retryable(err: Optional[IdnError]) -> bool:
    if err is not None and err.claim_refused:
        raise err
    return err is not None and (err.claim_required or err.action_required or err.code in _TRANSIENT)


class _Waiter:
    def __init__(self, timeout: float, initial_delay: float, max_delay: float, on_claim, on_action=None):
        self.deadline = time.monotonic() + timeout
        self.delay = initial_delay
        self.max_delay = max_delay
        self.on_claim = on_claim
        self.on_action = on_action
        self.claim_id: Optional[str] = None
        self.action_id: Optional[str] = None

    def pause(self, err: IdnError) -> float:
        """The pause before the next try; raises err when it would pass the deadline."""
        if err.claim_id and self.claim_id is None:
            self.claim_id = err.claim_id
            if self.on_claim:
                self.on_claim(err.claim_id, err)
        if err.action_id and err.action_id != self.action_id:
            self.action_id = err.action_id
            if self.on_action:
                self.on_action(err.action_id, err)
        pause = min(err.retry_after if err.retry_after is not None else self.delay, self.max_delay)
        if time.monotonic() + pause > self.deadline:
            raise err
        self.delay = min(self.delay * 2, self.max_delay)
        return pause


def wait_for_approval(attempt: Callable[[], Any], *, timeout: float = 600, initial_delay: float = 1,
                      max_delay: float = 30, on_claim: Optional[Callable[[str, IdnError], None]] = None,
                      on_action: Optional[Callable[[str, IdnError], None]] = None) -> Any:
    """Call attempt() until its answer is not "claim required" or "action
    approval required".

    The first refusal files a claim; the gateway remembers it, so every
    later try reuses the same claim id until the owner approves. on_claim is
    called once with it and the IdnError: show the owner the claim id and
    err.key_fingerprint, the key their claims page should show. Pauses grow
    from initial_delay to max_delay seconds (or follow Retry-After); answers
    that clear by themselves (AUTH_CLAIMS_UNAVAILABLE) are retried too.
    Returns the first other response (success or another error, for the
    caller to read). Raises the IdnError at once when the owner rejected or
    revoked the claim (AUTH_CLAIM_REJECTED, AUTH_CLAIM_REVOKED), and the last
    one when timeout seconds pass. Only envelopes an idn server marked count.
    attempt must send a freshly signed request each time (the auth classes do).

    A call the owner must approve with a passkey (AUTH_ACTION_APPROVAL_REQUIRED)
    is waited on the same way: on_action is called with each new action id,
    and AUTH_ACTION_DENIED ends the wait. attempt must send the same call
    (same body, same subject): an approval holds for that call only.
    """
    w = _Waiter(timeout, initial_delay, max_delay, on_claim, on_action)
    while True:
        response = attempt()
        err = read_error(response)
        if not _retryable(err):
            return response
        time.sleep(w.pause(err))


async def wait_for_approval_async(attempt: Callable[[], Awaitable[Any]], *, timeout: float = 600, initial_delay: float = 1,
                                  max_delay: float = 30, on_claim: Optional[Callable[[str, IdnError], None]] = None,
                                  on_action: Optional[Callable[[str, IdnError], None]] = None) -> Any:
    """wait_for_approval for an async attempt (an httpx.AsyncClient call)."""
    w = _Waiter(timeout, initial_delay, max_delay, on_claim, on_action)
    while True:
        response = await attempt()
        err = read_error(response)
        if not _retryable(err):
            return response
        await asyncio.sleep(w.pause(err))
