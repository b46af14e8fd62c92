"""A requests AuthBase that signs every request."""

from __future__ import annotations

import time
import weakref
from typing import Any, Optional

import requests

from ._retry import SIGNING, Retry
from .identity import Identity

_BODY_HEADERS = ("Content-Length", "Content-Type", "Transfer-Encoding")


class IdnAuth(requests.auth.AuthBase):
    """Signs each prepared request with identity: a fresh nonce and time
    each time, content-digest over the body as sent. Streamed bodies
    (generators, files) cannot be signed and raise ValueError.

    A signature is for one URL: when requests follows a redirect, the next
    request goes without the signing headers and without the body. Answers
    429, 502, 503 and 504 are retried as retry says (Retry(); Retry(0) turns
    it off), each try signed afresh. A network error of the first try is
    requests' own: mount an HTTPAdapter with max_retries for those.
    """

    def __init__(self, identity: Identity, subject: Optional[str] = None, retry: Optional[Retry] = None):
        self.identity = identity
        self.subject = subject
        self.retry = retry if retry is not None else Retry()
        self._signed: "weakref.WeakSet[requests.PreparedRequest]" = weakref.WeakSet()

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        body = r.body
        if body is not None and not isinstance(body, (bytes, str)):
            raise ValueError("idn: a streamed body cannot be signed; pass bytes or str")
        if isinstance(body, str):
            # http.client would send a str as Latin-1; send and sign UTF-8.
            body = body.encode("utf-8")
            r.body = body
            r.headers["Content-Length"] = str(len(body))
        self._sign(r)
        r.register_hook("response", self._answered)
        return r

    def _sign(self, r: requests.PreparedRequest) -> None:
        for name in SIGNING:
            r.headers.pop(name, None)
        mcp = {name: r.headers[name] for name in ("mcp-method", "mcp-name") if name in r.headers}
        r.headers.update(self.identity.sign(r.method or "GET", r.url or "", r.body, subject=self.subject, mcp=mcp))
        self._signed.add(r)

    def _answered(self, response: requests.Response, **kwargs: Any) -> requests.Response:
        """The response hook: retries, then strips the signature before
        requests copies the request to follow a redirect."""
        first = response.request
        if first not in self._signed:
            return response  # a redirected request, sent unsigned
        if self.retry.applies(first.method or "GET"):
            response = self._retried(response, kwargs)
        if response.is_redirect:
            # resolve_redirects copies the first request: strip that one.
            for r in {id(first): first, id(response.request): response.request}.values():
                for name in SIGNING + _BODY_HEADERS:
                    r.headers.pop(name, None)
                r.body = None
                self._signed.discard(r)
        return response

    def _retried(self, response: requests.Response, kwargs: dict) -> requests.Response:
        for attempt in range(self.retry.retries):
            pause = self.retry.pause(attempt, response.status_code, response.headers.get("retry-after"))
            if pause is None:
                return response
            response.content  # drain, so the connection returns to the pool
            response.close()
            time.sleep(pause)
            prep = response.request.copy()
            self._sign(prep)
            answer = response.connection.send(prep, **kwargs)
            answer.history.append(response)
            answer.request = prep
            response = answer
        return response
