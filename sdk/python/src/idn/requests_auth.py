"""A requests AuthBase that signs every request."""

from __future__ import annotations

from typing import Optional

import requests

from .identity import Identity

_SIGNING = ("signature", "signature-input", "content-digest", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert")


class IdnAuth(requests.auth.AuthBase):
    """Signs each prepared request with identity: a fresh nonce and time
    each time, content-digest over the body as sent. Streamed bodies
    (generators, files) cannot be signed and raise ValueError."""

    def __init__(self, identity: Identity, subject: Optional[str] = None):
        self.identity = identity
        self.subject = subject

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        body = r.body
        if body is not None and not isinstance(body, (bytes, str)):
            raise ValueError("idn: a streamed body cannot be signed; pass bytes or str")
        if isinstance(body, str):
            # http.client would send a str as Latin-1; send and sign UTF-8.
            body = body.encode("utf-8")
            r.body = body
            r.headers["Content-Length"] = str(len(body))
        for name in _SIGNING:
            r.headers.pop(name, None)
        r.headers.update(self.identity.sign(r.method or "GET", r.url or "", body, subject=self.subject))
        return r
