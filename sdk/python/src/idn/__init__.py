"""idn: sign HTTP and MCP requests as an idn agent under the
idn-rfc9421-v1 profile (RFC 9421, Ed25519).

- Identity: create, load and save identities in the idn CLI's format
  ($IDN_HOME/identities/<namespace>/identity.json) and sign requests.
- idn.httpx_auth.IdnAuth (httpx, sync and async; MCP clients on httpx) and
  idn.requests_auth.IdnAuth (requests) sign every request of a client.
- IdnError, read_error, raise_for_error: the servers' error envelope, typed.
- wait_for_approval, wait_for_approval_async: retry while the owner has not
  approved the claim.
- idn.verify: verify_request and WSGI and ASGI middleware, to accept idn
  agents in a service directly.
"""

from ._retry import Retry
from ._rules import decode_subject, encode_subject, validate_name, validate_namespace, validate_nonce, validate_subject
from .errors import (
    ACTION_APPROVAL_REQUIRED,
    CLAIM_REQUIRED,
    MARK_HEADER,
    IdnError,
    key_fingerprint,
    parse_retry_after,
    raise_for_error,
    read_error,
    wait_for_approval,
    wait_for_approval_async,
)
from .identity import (
    PROFILE,
    Identity,
    certificate_canonical_text,
    did,
    encode_certificate_header,
    idn_home,
    verify_certificate,
)

__all__ = [
    "ACTION_APPROVAL_REQUIRED",
    "CLAIM_REQUIRED",
    "MARK_HEADER",
    "PROFILE",
    "Retry",
    "Identity",
    "IdnError",
    "certificate_canonical_text",
    "decode_subject",
    "did",
    "encode_certificate_header",
    "encode_subject",
    "idn_home",
    "key_fingerprint",
    "parse_retry_after",
    "raise_for_error",
    "read_error",
    "validate_name",
    "validate_namespace",
    "validate_nonce",
    "validate_subject",
    "verify_certificate",
    "wait_for_approval",
    "wait_for_approval_async",
]
__version__ = "0.2.0"
