from __future__ import annotations

from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.functional import SimpleLazyObject
from ninja.errors import AuthenticationError

from .models import ApiToken
from .tokens import revocations, token_claims


class TokenUser(SimpleLazyObject):
    """The user a valid token names: the id known at once, the row read when more is asked.

    A purchase or a draw needs only the id, so it reads nothing; a call that looks further
    (a username, a staff permission, a foreign key assigned) reads the active user once.
    A user deactivated or deleted meanwhile (its tokens are revoked, but a process may not
    have read that yet) is refused there: 401.
    """

    def __init__(self, user_id: int) -> None:
        User = get_user_model()

        def read():
            user = User._default_manager.filter(pk=user_id, is_active=True).first()
            if user is None:
                raise AuthenticationError()
            return user

        super().__init__(read)
        # Set in the instance's own dictionary: attribute reads find them there, without
        # reading the row (LazyObject sends only the rest on to the user).
        self.__dict__.update(
            {"pk": user_id, User._meta.pk.attname: user_id, "is_authenticated": True, "is_anonymous": False}
        )

    def __bool__(self) -> bool:
        # ninja asks whether authentication found someone: it did, without reading the row.
        return True


def user_for_token(*, raw: str) -> TokenUser | None:
    """The user holding this bearer token, while it is signed by us, has not ended and was
    not revoked; or None. No query (``accounts.tokens``)."""
    claims = token_claims(raw)
    if claims is None or revocations.revoked(claims):
        return None
    return TokenUser(claims.user_id)


def tokens_of_user(*, user) -> list[ApiToken]:
    """The user's tokens that still work, newest first."""
    return list(ApiToken.objects.filter(user=user, expires_at__gt=timezone.now()).order_by("-created_at", "-pk"))
