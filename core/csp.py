"""A Content-Security-Policy on every response.

The policy is the same for every page, so a header set once is all it takes: no nonces,
no per-request state (which is what a library such as django-csp adds). Our pages load
htmx and their scripts and styles from static files and have nothing inline, so a script
or style injected into one does not run. A view that needs something else says so with
:func:`csp_replace`; the middleware leaves a policy a view set alone.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

HEADER = "Content-Security-Policy"


def policy(**directives: str) -> str:
    """``name-src value`` pairs over :data:`BASE`; keyword ``_`` stands for ``-``."""
    merged = {**BASE, **{name.replace("_", "-"): value for name, value in directives.items()}}
    return "; ".join(f"{name} {value}" for name, value in merged.items())


BASE = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "font-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    # Framing refused, as X-Frame-Options DENY says to older browsers.
    "frame-ancestors": "'none'",
}
DEFAULT_POLICY = policy()
# Swagger UI at /api/docs (ninja serves it from our static files, no CDN) draws some of its
# icons from data: URIs in its stylesheet; its scripts and styles stay our own
# (tests/test_csp_browser.py tries a call and opens the dialogs under this policy).
SWAGGER_UI_POLICY = policy(img_src="'self' data:")


def csp_replace(value: str) -> Callable:
    """A view decorator: answer with ``value`` as the policy instead of the default."""

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            response = view(request, *args, **kwargs)
            response[HEADER] = value
            return response

        return wrapped

    return decorate


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault(HEADER, DEFAULT_POLICY)
        return response
