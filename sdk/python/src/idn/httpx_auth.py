"""An httpx.Auth that signs every request, for httpx.Client and
httpx.AsyncClient alike, and so for MCP clients built on httpx (pass it
as their auth)."""

from __future__ import annotations

from typing import Generator, Optional

import httpx

from .identity import Identity

_SIGNING = ("signature", "signature-input", "content-digest", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert")


class IdnAuth(httpx.Auth):
    """Signs each request with identity: a fresh nonce and time each time,
    content-digest over the body as sent."""

    requires_request_body = True

    def __init__(self, identity: Identity, subject: Optional[str] = None):
        self.identity = identity
        self.subject = subject

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        for name in _SIGNING:
            request.headers.pop(name, None)
        signed = self.identity.sign(request.method, str(request.url), request.content, subject=self.subject)
        request.headers.update(signed)
        yield request
