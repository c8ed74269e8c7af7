from django.contrib.auth import authenticate, login
from ninja import Router, Schema
from ninja.errors import AuthenticationError
from pydantic import Field

from core.schemas import BODY_ERRORS, InputSchema, errors

from .services import token_issue

router = Router(tags=["auth"])


class LoginIn(InputSchema):
    username: str = Field(min_length=1, max_length=150)
    password: str = Field(min_length=1, max_length=4096)


class TokenOut(Schema):
    token: str


@router.post("/auth/login", response={200: TokenOut, **errors(401, 429, *BODY_ERRORS)}, auth=None)
def auth_login(request, payload: LoginIn):
    user = authenticate(request, username=payload.username, password=payload.password)
    if user is None:
        throttled = getattr(request, "login_throttled", None)  # set by accounts.backends
        if throttled is not None:
            raise throttled
        raise AuthenticationError(message="Wrong username or password.")
    login(request, user)
    return {"token": token_issue(user=user)}
