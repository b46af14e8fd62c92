"""When and how long the auth classes wait before retrying a request."""

from __future__ import annotations

import random
from typing import Optional

from .errors import parse_retry_after

#: The headers a signature consists of; a redirected request carries none.
SIGNING = ("signature", "signature-input", "content-digest", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert")

_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
_RETRY_STATUS = frozenset({429, 502, 503, 504})


class Retry:
    """The retry policy of the auth classes: 429, 502, 503 and 504 answers to
    idempotent requests are retried ``retries`` times (default 2; 0 turns
    retrying off), after pauses that double from ``initial_delay`` to
    ``max_delay`` seconds, jittered, or as Retry-After says (a longer one
    ends retrying). POST and PATCH only with ``non_idempotent=True``: when
    sending one twice is harmless. Each try is signed afresh."""

    def __init__(self, retries: int = 2, *, non_idempotent: bool = False, initial_delay: float = 0.5, max_delay: float = 10.0):
        self.retries = retries
        self.non_idempotent = non_idempotent
        self.initial_delay = initial_delay
        self.max_delay = max_delay

    def applies(self, method: str) -> bool:
        return self.retries > 0 and (method.upper() in _IDEMPOTENT or self.non_idempotent)

    def pause(self, attempt: int, status: Optional[int], retry_after: Optional[str]) -> Optional[float]:
        """Seconds to wait before try attempt+1 after an answer with status
        (None: a network error), or None to stop."""
        if attempt >= self.retries or (status is not None and status not in _RETRY_STATUS):
            return None
        after = parse_retry_after(retry_after)
        if after is not None:
            return after if after <= self.max_delay else None
        d = min(self.initial_delay * 2 ** attempt, self.max_delay)
        return d / 2 + random.random() * d / 2  # so that refused clients do not return together
