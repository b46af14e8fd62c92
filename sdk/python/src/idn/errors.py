"""The error envelope both idn servers answer with, as a typed error, and
waiting for an owner's approval."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Optional

CLAIM_REQUIRED = "AUTH_CLAIM_REQUIRED"

# Codes that clear by themselves: the waits retry them too.
_TRANSIENT = frozenset({"AUTH_CLAIMS_UNAVAILABLE", "AUTH_REPLAY_DETECTED", "NONCE_REPLAY"})


class IdnError(Exception):
    """An error answer of a gateway or control plane: the JSON envelope
    {"error","code","request_id","timestamp",...} with the HTTP status."""

    def __init__(self, status: int, envelope: Optional[dict], headers: Any = None):
        def s(k: str) -> Optional[str]:
            v = (envelope or {}).get(k)
            return v if isinstance(v, str) else None

        #: The stable code, e.g. "AUTH_CLAIM_REQUIRED"; "HTTP_<status>" when the body is not an envelope.
        self.code: str = s("code") or f"HTTP_{status}"
        self.status: int = status
        #: The request id (the envelope's request_id or the X-Request-Id header).
        self.request_id: Optional[str] = s("request_id") or (headers.get("x-request-id") if headers is not None else None)
        #: The claim the gateway filed (AUTH_CLAIM_REQUIRED), and its status.
        self.claim_id: Optional[str] = s("claim_id")
        self.claim_status: Optional[str] = s("claim_status")
        ra = headers.get("retry-after") if headers is not None else None
        #: Seconds from the Retry-After header, if any.
        self.retry_after: Optional[int] = int(ra) if ra and ra.isdigit() else None
        #: The whole decoded envelope (None when the body was not JSON).
        self.envelope: Optional[dict] = envelope
        super().__init__(f"{self.code} ({status}): {s('error') or 'no error envelope'}")

    @property
    def claim_required(self) -> bool:
        """True when the agent waits for an owner's approval (a claim was filed)."""
        return self.code == CLAIM_REQUIRED


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
    return IdnError(status, envelope, response.headers)


def raise_for_error(response: Any) -> Any:
    """Return the response when it is not an error, else raise its IdnError."""
    err = read_error(response)
    if err is not None:
        raise err
    return response


def _retryable(err: Optional[IdnError]) -> bool:
    return err is not None and (err.claim_required or err.code in _TRANSIENT)


class _Waiter:
    def __init__(self, timeout: float, initial_delay: float, max_delay: float, on_claim):
        self.deadline = time.monotonic() + timeout
        self.delay = initial_delay
        self.max_delay = max_delay
        self.on_claim = on_claim
        self.claim_id: Optional[str] = None

    def pause(self, err: IdnError) -> float:
        """The pause before the next try; raises err when it would pass the deadline."""
        if err.claim_id and self.claim_id is None:
            self.claim_id = err.claim_id
            if self.on_claim:
                self.on_claim(err.claim_id, err)
        pause = min(err.retry_after if err.retry_after is not None else self.delay, self.max_delay)
        if time.monotonic() + pause > self.deadline:
            raise err
        self.delay = min(self.delay * 2, self.max_delay)
        return pause


def wait_for_approval(attempt: Callable[[], Any], *, timeout: float = 600, initial_delay: float = 1,
                      max_delay: float = 30, on_claim: Optional[Callable[[str, IdnError], None]] = None) -> Any:
    """Call attempt() until its answer is not "claim required".

    The first refusal files a claim; the gateway remembers it, so every
    later try reuses the same claim id until the owner approves (on_claim is
    called once with it). Pauses grow from initial_delay to max_delay seconds
    (or follow Retry-After); answers that clear by themselves
    (AUTH_CLAIMS_UNAVAILABLE) are retried too. Returns the first other
    response (success or another error, for the caller to read) and raises
    the last IdnError when timeout seconds pass. attempt must send a freshly
    signed request each time (the auth classes do).
    """
    w = _Waiter(timeout, initial_delay, max_delay, on_claim)
    while True:
        response = attempt()
        err = read_error(response)
        if not _retryable(err):
            return response
        time.sleep(w.pause(err))


async def wait_for_approval_async(attempt: Callable[[], Awaitable[Any]], *, timeout: float = 600, initial_delay: float = 1,
                                  max_delay: float = 30, on_claim: Optional[Callable[[str, IdnError], None]] = None) -> Any:
    """wait_for_approval for an async attempt (an httpx.AsyncClient call)."""
    w = _Waiter(timeout, initial_delay, max_delay, on_claim)
    while True:
        response = await attempt()
        err = read_error(response)
        if not _retryable(err):
            return response
        await asyncio.sleep(w.pause(err))
