"""Where a browser says a request comes from: the rule that keeps a cross-site page from
logging a visitor's browser in to someone else's account (login CSRF).

The same rule as Django's ``CsrfViewMiddleware`` applies to the Origin header: this
site's scheme and host, or one of ``CSRF_TRUSTED_ORIGINS`` (``https://*.example.com``
trusting every subdomain). Without an Origin the Referer stands in for it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.utils.http import is_same_domain


def request_origin(request) -> str | None:
    """The origin the browser declared, ``scheme://host[:port]``; ``"null"`` for an opaque
    one; None when the request carries neither Origin nor Referer (not a browser's form or
    script: browsers send Origin with every POST)."""
    origin = request.META.get("HTTP_ORIGIN")
    if origin:
        return origin.strip().lower()
    referer = request.META.get("HTTP_REFERER")
    if referer:
        parts = urlsplit(referer.strip())
        return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else "null"
    return None


def origin_trusted(request, origin: str) -> bool:
    """Whether ``origin`` is this site (as the request reached it) or a trusted origin."""
    own = f"{'https' if request.is_secure() else 'http'}://{request.get_host()}".lower()
    if origin == own:
        return True
    parts = urlsplit(origin)
    if not parts.scheme or not parts.netloc:
        return False
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        allowed = urlsplit(trusted.lower())
        if allowed.scheme != parts.scheme:
            continue
        if allowed.netloc.startswith("*."):
            if is_same_domain(parts.netloc, allowed.netloc[1:]):
                return True
        elif allowed.netloc == parts.netloc:
            return True
    return False
