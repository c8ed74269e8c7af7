"""The provider's signature on its callbacks: an HMAC-SHA256 of the body under a key derived
from ``SECRET_KEY`` (``salted_hmac``, salted for this use alone), so that no key known outside
the machine signs one, and the callback endpoint checks it in constant time. A replayed
callback is signed, and harmless: a payment is resolved once (``payments.services``)."""

from __future__ import annotations

from django.utils.crypto import constant_time_compare, salted_hmac

from .errors import BadSignature

HEADER = "X-Provider-Signature"
META = "HTTP_X_PROVIDER_SIGNATURE"
SALT = "payments.provider.callback"
PATTERN = r"^[0-9a-f]{64}$"

# The header as the callback's OpenAPI parameter (``openapi_extra``'s ``parameters``).
PARAMETER = {
    "in": "header",
    "name": HEADER,
    "required": True,
    "description": "The provider's HMAC-SHA256 of the request body, in hex.",
    "schema": {"type": "string", "pattern": PATTERN},
}


def callback_sign(body: bytes) -> str:
    """The signature of a callback's ``body``."""
    return salted_hmac(SALT, body, algorithm="sha256").hexdigest()


def callback_verify(body: bytes, signature: str | None) -> None:
    """``BadSignature`` unless ``signature`` is the provider's for ``body``."""
    if not signature or not constant_time_compare(callback_sign(body), signature):
        raise BadSignature()
