from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


def token_expiry():
    """When a token issued now ends: ``API_TOKEN_TTL_SECONDS`` from now. Also what the
    migration that added expiry gave the tokens that existed then."""
    return timezone.now() + timedelta(seconds=settings.API_TOKEN_TTL_SECONDS)


class ApiToken(models.Model):
    """A bearer token for API clients. Only its SHA-256 is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(default=token_expiry)

    def __str__(self) -> str:
        return f"token of {self.user_id} ({self.key_hash[:8]}...)"


class RevokedToken(models.Model):
    """A token deleted before its end, kept until that end so that every process learns it
    no longer works (``accounts.tokens``: tokens are checked without reading ``ApiToken``)."""

    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    # Indexed: every token issued purges the revocations that have ended.
    expires_at = models.DateTimeField(db_index=True)
    revoked_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"revoked token {self.key_hash[:8]}..."


class ActiveChange(models.Model):
    """A change that decides whether a user's tokens work, written by the database itself
    (``accounts.triggers``) whichever way it was made, a ``QuerySet.update`` included: a user
    who held a live token deactivated, any user reactivated, a token issued to an inactive
    user. Each process reads the changes since its last read (``accounts.tokens``), with the
    user's ``is_active`` as it is now, rather than every token of every inactive user.

    Kept while the user's tokens live (``expires_at``: the latest end among them, or the
    change's own moment for a reactivation), and ``CHANGES_KEPT`` after: a process that
    starts reads those that have not ended, and learns every inactive user holding a token."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # The database's clock (UTC), not a process's: the triggers stamp it.
    changed_at = models.DateTimeField(db_index=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"active change of {self.user_id} at {self.changed_at:%Y-%m-%d %H:%M:%S}"
