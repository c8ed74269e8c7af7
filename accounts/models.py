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
    # The token's number among its user's, signed into it: each new one is above every
    # number the user's ``TokenCutoff`` names (``accounts.services.token_issue``).
    stamp = models.PositiveBigIntegerField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(default=token_expiry)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "stamp"], name="accounts_token_stamp_unique")]

    def __str__(self) -> str:
        return f"token of {self.user_id} ({self.key_hash[:8]}...)"


class TokenCutoff(models.Model):
    """Which of one user's tokens are refused since one of them was revoked: every token
    stamped ``stamp`` or below, but those in ``spared``. Every process keeps these rows
    (``accounts.tokens``: tokens are checked without reading ``ApiToken``), one per user
    whatever the number of tokens revoked: logging in and out for ever costs one row.

    No foreign key: a deleted user's row outlives the user, and refuses its tokens until
    they end (``expires_at``: the latest end of a token it refuses)."""

    user_id = models.PositiveBigIntegerField(unique=True)
    stamp = models.PositiveBigIntegerField()
    # The stamps, space-separated, of the user's tokens at or below ``stamp`` that still
    # work: at most ``API_TOKENS_PER_USER``.
    spared = models.TextField(blank=True, default="")
    # The process's clock: the revocations are read since a process's last read.
    changed_at = models.DateTimeField(db_index=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"tokens of {self.user_id} refused up to {self.stamp}"


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
