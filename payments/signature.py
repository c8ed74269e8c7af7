"""The provider's signature on its callbacks, checked over the raw body before anything reads it.

``X-Provider-Signature: t=<unix seconds>,n=<nonce>,v1=<hex>``: an HMAC-SHA256 of
``<t>.<n>.<body>`` under a key derived from ``SECRET_KEY`` (``salted_hmac``, salted for this
use alone), so that no key known outside the machine signs one, compared in constant time.
A callback signed under a key being rotated out (one of ``SECRET_KEY_FALLBACKS``) is
accepted, as admission tickets and API tokens are; callbacks are signed under the current key.
The time and the nonce are signed with the body, so that neither can be changed:

- a callback signed more than ``PAYMENT_CALLBACK_TOLERANCE_SECONDS`` from now (either way) is
  refused, ``signature_expired``: one overheard goes stale;
- a callback whose signature was accepted before is refused, ``signature_replayed``: each
  accepted signature is remembered in Redis, one key with an expiry, until it would be
  refused as stale anyway (constant cost, nothing to sweep). Each post of the provider,
  duplicates and resends included, is signed afresh with a nonce of its own, so that only
  a copy of a post already accepted is a replay;
- a signature without a time (the form before times were signed), or not the provider's, is
  ``bad_signature``.
"""

from __future__ import annotations

import re
import secrets
import time

from django.conf import settings
from django.utils.crypto import constant_time_compare, salted_hmac

from core.namespace import key_prefix
from locking.integration import locks_redis

from .errors import BadSignature, SignatureExpired, SignatureReplayed

HEADER = "X-Provider-Signature"
META = "HTTP_X_PROVIDER_SIGNATURE"
SALT = "payments.provider.callback"
PATTERN = r"^t=[0-9]{1,12},n=[0-9a-f]{32},v1=[0-9a-f]{64}$"
_SIGNED = re.compile(PATTERN)

# The header as the callback's OpenAPI parameter (``openapi_extra``'s ``parameters``).
PARAMETER = {
    "in": "header",
    "name": HEADER,
    "required": True,
    "description": (
        "t=<unix seconds>,n=<32 hex nonce>,v1=<the provider's HMAC-SHA256 of '<t>.<n>.<body>', in hex>; "
        "refused when not within the tolerance of now, or accepted before."
    ),
    "schema": {"type": "string", "pattern": PATTERN},
}


def _mac(body: bytes, *, at: int, nonce: str, secret: str | None = None) -> str:
    return salted_hmac(SALT, f"{at}.{nonce}.".encode() + body, secret=secret, algorithm="sha256").hexdigest()


def callback_sign(body: bytes, *, at: float | None = None, nonce: str | None = None) -> str:
    """The ``X-Provider-Signature`` of a callback of ``body`` sent at ``at`` (now by default),
    under a fresh nonce unless one is given."""
    at = int(time.time() if at is None else at)
    nonce = secrets.token_hex(16) if nonce is None else nonce
    return f"t={at},n={nonce},v1={_mac(body, at=at, nonce=nonce)}"


def callback_verify(body: bytes, header: str | None, *, now: float | None = None) -> None:
    """Return when ``header`` is the provider's signature of ``body``, signed within the
    tolerance of ``now`` and never accepted before; it is then remembered as accepted.
    Raises ``BadSignature``, ``SignatureExpired`` or ``SignatureReplayed``."""
    if not header or not _SIGNED.match(header):
        raise BadSignature()
    fields = dict(part.split("=", 1) for part in header.split(","))
    at, nonce, mac = int(fields["t"]), fields["n"], fields["v1"]
    # The current key, then each being rotated out: a callback signed just before a rotation
    # (its resends included) is still the provider's.
    keys = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    if not any(constant_time_compare(_mac(body, at=at, nonce=nonce, secret=key), mac) for key in keys):
        raise BadSignature()
    now = time.time() if now is None else now
    tolerance = settings.PAYMENT_CALLBACK_TOLERANCE_SECONDS
    if abs(now - at) > tolerance:
        raise SignatureExpired()
    # Remembered until the signature is stale, and a second longer for the clocks' rounding.
    remembered_ms = int((at + tolerance - now + 1) * 1000)
    if not locks_redis().set(f"{key_prefix()}callback:seen:{mac}", 1, nx=True, px=max(1, remembered_ms)):
        raise SignatureReplayed()
