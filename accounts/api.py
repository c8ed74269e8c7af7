from datetime import datetime

from django.contrib.auth import authenticate, login, logout
from django.http import HttpResponse
from ninja import Router, Schema
from ninja.errors import AuthenticationError
from pydantic import Field

from core.api import refuse_body, require_plain_json
from core.schemas import InputSchema, answers

from .auth import CsrfFailed
from .origin import origin_trusted, request_origin
from .selectors import tokens_of_user
from .services import token_hash, token_issue, token_revoke, token_revoke_raw

router = Router(tags=["auth"])

# The tokens' list gives the id that revoking one takes.
TOKEN_LIST = {
    "responses": {
        200: {
            "links": {
                "RevokeToken": {
                    "operationId": "accounts_api_auth_token_revoke",
                    "parameters": {"token_id": "$response.body#/0/id"},
                }
            }
        }
    }
}


class LoginIn(InputSchema):
    username: str = Field(min_length=1, max_length=150)
    password: str = Field(min_length=1, max_length=4096)


class TokenOut(Schema):
    token: str


class TokenInfoOut(Schema):
    """A token as its holder sees it: only its hash is stored, so never its value."""

    id: int
    created_at: datetime
    expires_at: datetime
    current: bool


def _bearer(request) -> str | None:
    """The raw bearer token the request was sent with, if any (read as ninja reads it)."""
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    return raw.strip()


@router.post(
    "/auth/login",
    # 401 a wrong username or password; 403 csrf_failed (a page of another site).
    response=answers({200: TokenOut}, login=False, body="json", refusals=(401, 403), limited=True),
    auth=None,
)
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


@router.post("/auth/logout", response=answers({204: None}, unsafe=True, body="none"))
def auth_logout(request):
    """Revoke the bearer token the request was sent with, and end the session if there is one."""
    refuse_body(request, action="logout")
    raw = _bearer(request)
    if raw is not None:
        token_revoke_raw(user=request.auth, raw=raw)
    logout(request)
    return HttpResponse(status=204)


@router.get("/auth/tokens", response=answers({200: list[TokenInfoOut]}), openapi_extra=TOKEN_LIST)
def auth_tokens(request):
    """The caller's tokens that still work, newest first; ``current`` is the one sent."""
    raw = _bearer(request)
    used = token_hash(raw) if raw is not None else None
    return [
        {"id": t.pk, "created_at": t.created_at, "expires_at": t.expires_at, "current": t.key_hash == used}
        for t in tokens_of_user(user=request.auth)
    ]


@router.delete("/auth/tokens/{int:token_id}", response=answers({204: None}, unsafe=True, item=True))
def auth_token_revoke(request, token_id: int):
    """Revoke one of the caller's tokens (another user's is 404)."""
    token_revoke(user=request.auth, token_id=token_id)
    return HttpResponse(status=204)
