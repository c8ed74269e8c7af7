"""API authentication: bearer tokens for API clients, the session (with CSRF) for the browser."""

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from ninja.security import HttpBearer
from ninja.security.apikey import APIKeyCookie
from ninja.utils import check_csrf

from core.errors import DomainError

from .permissions import staff_holds
from .selectors import user_for_token


class CsrfFailed(DomainError):
    code = "csrf_failed"
    status = 403
    default_message = "CSRF check failed: send the csrftoken cookie's value in the X-CSRFToken header."


class Forbidden(DomainError):
    code = "forbidden"
    status = 403
    default_message = "Staff with the permission for this call only."


class BearerToken(HttpBearer):
    def __call__(self, request):
        # As ninja's, but reading the one header from META: ``request.headers`` builds a
        # mapping of every header first, a fifth of the cost of checking the token.
        scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != self.openapi_scheme or not token:
            return None
        return self.authenticate(request, token)

    def authenticate(self, request, token: str):
        user = user_for_token(raw=token)
        if user is not None:
            request.user = user
        return user


class SessionWithCsrf(APIKeyCookie):
    """The browser's Django session; unsafe methods need the CSRF token.

    Unlike ninja's ``django_auth`` it checks CSRF only for a logged-in session, so
    an anonymous client is told 401 (log in), not 403.
    """

    param_name = settings.SESSION_COOKIE_NAME

    def __init__(self) -> None:
        super().__init__(csrf=False)

    def authenticate(self, request, key):
        if not request.user.is_authenticated:
            return None
        # The CSRF check parses a form body; read the raw body first so views can still see it.
        request.body  # noqa: B018
        if check_csrf(request) is not None:
            raise CsrfFailed()
        return request.user


def require_permission(request, *permissions: str) -> None:
    """Refuse the caller unless an active member of staff holding one of ``permissions``,
    as the admin site would. Called first in a view, before the item is looked up, so that
    a refused caller learns nothing, not even whether it exists."""
    if not staff_holds(request.auth, *permissions):
        names = " or ".join(permissions)
        raise Forbidden(f"This call needs a member of staff with the {names} permission.")


def anonymous(request):
    """The last resort of ``optional_auth``: an anonymous caller (truthy, so ninja lets it in)."""
    return AnonymousUser()


# Bearer first: a request that carries a token never needs a CSRF token.
api_auth = [BearerToken(), SessionWithCsrf()]
# For reads that answer everyone and tell a logged-in caller more (a pool's draws left).
optional_auth = [*api_auth, anonymous]
