from __future__ import annotations

from .models import ApiToken
from .services import token_hash


def user_for_token(*, raw: str):
    """The active user holding this bearer token, or None."""
    token = ApiToken.objects.select_related("user").filter(key_hash=token_hash(raw)).first()
    if token is None or not token.user.is_active:
        return None
    return token.user
