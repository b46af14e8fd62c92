"""An httpx.Auth that signs every request, for httpx.Client and
httpx.AsyncClient alike, and so for MCP clients built on httpx (pass it
as their auth)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncGenerator, Callable, Generator, Optional

import httpx

from ._retry import SIGNING, Retry
from .identity import Identity

_SIGNING_BYTES = frozenset(name.encode() for name in SIGNING)
_SENDING_HEADERS = "send_request_headers.started"  # httpcore's trace event, HTTP/1.1 and HTTP/2


class IdnAuth(httpx.Auth):
    """Signs each request with identity: a fresh nonce and time each time,
    content-digest over the body as sent.

    A signature is for one URL. A client with follow_redirects=True (MCP
    clients' default) follows below any Auth, so IdnAuth watches the
    request through httpcore's trace extension and removes the signing
    headers from any request whose URL is not the one signed; httpx itself
    still re-sends the body of a 307 or 308. Answers 429, 502, 503 and 504
    are retried as retry says (Retry(); Retry(0) turns it off), each try
    signed afresh; network errors are the transport's
    (httpx.HTTPTransport(retries=...) retries failed connections).
    """

    def __init__(self, identity: Identity, subject: Optional[str] = None, retry: Optional[Retry] = None):
        self.identity = identity
        self.subject = subject
        self.retry = retry if retry is not None else Retry()

    def _sign(self, request: httpx.Request) -> None:
        for name in SIGNING:
            request.headers.pop(name, None)
        mcp = {name: request.headers[name] for name in ("mcp-method", "mcp-name") if name in request.headers}
        request.headers.update(self.identity.sign(request.method, str(request.url), request.content, subject=self.subject, mcp=mcp))

    def _pause(self, request: httpx.Request, response: httpx.Response, attempt: int) -> Optional[float]:
        if not self.retry.applies(request.method):
            return None
        return self.retry.pause(attempt, response.status_code, response.headers.get("retry-after"))

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.read()
        request.extensions = {**request.extensions, "trace": _sync_trace(request, request.extensions.get("trace"))}
        for attempt in range(self.retry.retries + 1):
            self._sign(request)
            response = yield request
            pause = self._pause(request, response, attempt)
            if pause is None:
                return
            response.read()  # frees the connection; httpx keeps it in history
            time.sleep(pause)

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        await request.aread()
        request.extensions = {**request.extensions, "trace": _async_trace(request, request.extensions.get("trace"))}
        for attempt in range(self.retry.retries + 1):
            self._sign(request)
            response = yield request
            pause = self._pause(request, response, attempt)
            if pause is None:
                return
            await response.aread()
            await asyncio.sleep(pause)


def _unsign_elsewhere(signed: httpx.Request) -> Callable[[str, dict], None]:
    """Returns a trace step that removes the signing headers from an
    outgoing httpcore request whose URL differs from signed's (a redirect
    the client follows: the redirected request shares the extensions)."""
    u = signed.url
    origin_form = (u.raw_scheme, u.raw_host, u.port, u.raw_path)
    absolute = str(u.copy_with(fragment=None)).encode("ascii")

    def step(name: str, info: dict) -> None:
        if not name.endswith(_SENDING_HEADERS):
            return
        out = info.get("request")
        if out is None:
            return
        t = out.url
        # A forward proxy sends the absolute URL as the request target.
        if (t.scheme, t.host, t.port, t.target) == origin_form or t.target == absolute:
            return
        out.headers[:] = [(k, v) for k, v in out.headers if k.lower() not in _SIGNING_BYTES]

    return step


def _sync_trace(signed: httpx.Request, inner: Any) -> Callable[[str, dict], None]:
    step = _unsign_elsewhere(signed)

    def trace(name: str, info: dict) -> None:
        step(name, info)
        if inner is not None:
            inner(name, info)

    return trace


def _async_trace(signed: httpx.Request, inner: Any) -> Callable[[str, dict], Any]:
    step = _unsign_elsewhere(signed)

    async def trace(name: str, info: dict) -> None:
        step(name, info)
        if inner is not None:
            await inner(name, info)

    return trace
