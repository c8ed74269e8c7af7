"""What a request says of the scheme it came by is believed from a trusted proxy only."""

from __future__ import annotations

from .ratelimit import peer_is_trusted_proxy


class ProxiedSchemeMiddleware:
    """Drop ``X-Forwarded-Proto`` unless one of ``TRUSTED_PROXIES`` sent the request.

    Production believes that header for ``request.is_secure()`` (``SECURE_PROXY_SSL_HEADER``:
    TLS ends at the proxy): sent by anyone else, straight to gunicorn, it would pass plain
    HTTP for HTTPS (no redirect, the CSRF check's secure origin), as ``X-Forwarded-For`` would
    pass another address, which only a trusted proxy's is believed for (``core.ratelimit``).
    Before Django's ``SecurityMiddleware``, which reads it first."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if "HTTP_X_FORWARDED_PROTO" in request.META and not peer_is_trusted_proxy(request):
            del request.META["HTTP_X_FORWARDED_PROTO"]
        return self.get_response(request)
