from django.contrib.auth import authenticate, login
from ninja import Router, Schema
from ninja.errors import AuthenticationError
from pydantic import Field

from core.api import require_plain_json
from core.schemas import BODY_ERRORS, InputSchema, errors

from .auth import CsrfFailed
from .origin import origin_trusted, request_origin
from .services import token_issue

router = Router(tags=["auth"])


class LoginIn(InputSchema):
    username: str = Field(min_length=1, max_length=150)
    password: str = Field(min_length=1, max_length=4096)


class TokenOut(Schema):
    token: str


@router.post("/auth/login", response={200: TokenOut, **errors(401, 403, 429, *BODY_ERRORS)}, auth=None)
def auth_login(request, payload: LoginIn):
    """A bearer token; a browser on this site (or a trusted origin) also gets a session.

    A browser names the page that sent the request (Origin, else Referer): a page of
    another site is refused, so it cannot log a visitor in to the account it chose (login
    CSRF). A client that names none is not a browser's form or script and gets its token
    without a session.
    """
    require_plain_json(request)
    origin = request_origin(request)
    if origin is not None and not origin_trusted(request, origin):
        raise CsrfFailed(f"A login from {origin} is refused: only this site's own pages log a browser in.")
    user = authenticate(request, username=payload.username, password=payload.password)
    if user is None:
        throttled = getattr(request, "login_throttled", None)  # set by accounts.backends
        if throttled is not None:
            raise throttled
        raise AuthenticationError(message="Wrong username or password.")
    if origin is not None:
        login(request, user)
    return {"token": token_issue(user=user)}
