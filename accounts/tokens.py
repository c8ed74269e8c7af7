"""Bearer tokens that are checked without a database query.

A token names its user and its end, signed with the secret key:
``<user id>.<end, unix seconds>.<random>:<signature>`` (``django.core.signing``, so a key
rotation through ``SECRET_KEY_FALLBACKS`` keeps the tokens working). Checking one costs a
signature, a hash and a set lookup: a purchase or a draw under ``redis_lua`` then reads
nothing of the database at all, where the query for the token's user cost more than the
Lua script that does the sale.

The database still holds every token, as its SHA-256 only (``ApiToken``), to list and
revoke them. A token deleted before its end (logout, a password change, the user
deactivated or deleted, revoked by its owner, dropped for a newer one) is recorded in
``RevokedToken`` until that end. Every process reads the revocations recorded since its
last read at most ``API_TOKEN_REVOCATIONS_REFRESH_SECONDS`` before it trusts a token, and
at once after a revocation of its own: a revocation holds everywhere within that bound.
The same read takes the tokens of inactive users as revoked, so a user deactivated by a
``QuerySet.update`` (no signal, nothing revoked) is refused within that bound too, and gets
its tokens back if reactivated the same way, as Django's sessions do.
A process that has not managed to read them for ``API_TOKEN_REVOCATIONS_STALE_SECONDS``
refuses every token with a 503 rather than trust one that may have been revoked.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core import signing
from django.db import DatabaseError
from django.utils import timezone

from core.errors import Unavailable

SALT = "accounts.tokens"
# A token as issued is about 90 characters; anything much longer is not one of ours, and
# not worth a signature's work.
MAX_LENGTH = 200
# How far back each read of the revocations looks beyond the last one: a revocation is
# stamped by the clock of the process that made it, and may commit a little after that.
OVERLAP = timedelta(seconds=60)
# The wall clock that decides whether a token has ended: replaceable in tests.
wall_clock: Callable[[], float] = time.time


class RevocationsUnknown(Unavailable):
    """The revocations could not be read for too long: no token is trusted meanwhile."""

    default_message = "Tokens cannot be checked right now; try again shortly."


def token_hash(raw: str) -> str:
    """What the database keeps of a token: its SHA-256, never the token."""
    return hashlib.sha256(raw.encode()).hexdigest()


def _signer() -> signing.Signer:
    # Made once per key set: every authenticated request checks a token, and making the
    # signer (settings read, separator checked) cost a third of the check.
    return _signer_for(settings.SECRET_KEY, tuple(settings.SECRET_KEY_FALLBACKS))


@functools.lru_cache(maxsize=4)
def _signer_for(key: str, fallback_keys: tuple[str, ...]) -> signing.Signer:
    return signing.Signer(key=key, fallback_keys=list(fallback_keys), salt=SALT, algorithm="sha256")


def token_new(*, user_id: int, expires_at: datetime) -> str:
    """A token for ``user_id`` that works until ``expires_at`` (to the second, rounded down)."""
    end = int(expires_at.timestamp())
    return _signer().sign(f"{user_id}.{end}.{secrets.token_urlsafe(16)}")


@dataclass(frozen=True)
class Claims:
    """What a token with a valid signature says."""

    user_id: int
    expires_at: int  # unix seconds
    key_hash: str


def token_claims(raw: str, *, now: float | None = None) -> Claims | None:
    """The claims of ``raw`` if its signature is ours and it has not ended at ``now`` (unix
    seconds, the clock's by default); None otherwise. Says nothing of revocation."""
    if len(raw) > MAX_LENGTH:
        return None
    try:
        value = _signer().unsign(raw)
        user_id, end, _nonce = value.split(".")
        claims = Claims(user_id=int(user_id), expires_at=int(end), key_hash=token_hash(raw))
    except (signing.BadSignature, ValueError):
        return None
    if claims.expires_at <= (wall_clock() if now is None else now):
        return None
    return claims


class Revocations:
    """The hashes of the revoked tokens that have not ended yet, as this process last read
    them (one per process: see :data:`revocations`), and those of the users inactive then.
    ``clock`` is monotonic, replaceable in tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._ends: dict[str, float] = {}
        self._inactive: frozenset[str] = frozenset()
        self._read_at: float | None = None  # by ``clock``
        self._since: datetime | None = None  # the wall time the last read started
        self._pruned_at: datetime | None = None

    def revoked(self, key_hash: str) -> bool:
        """Whether the token of ``key_hash`` was revoked, reading the revocations first when
        the last read is older than the refresh interval."""
        age = None if self._read_at is None else self.clock() - self._read_at
        if age is None or age >= settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS:
            try:
                self._read()
            except DatabaseError as exc:
                if age is None or age >= settings.API_TOKEN_REVOCATIONS_STALE_SECONDS:
                    raise RevocationsUnknown() from exc
        return key_hash in self._ends or key_hash in self._inactive

    def read_soon(self) -> None:
        """Read again before the next check (this process has just revoked a token: the
        read then sees it, and sees nothing if the revocation was rolled back)."""
        self._read_at = None

    def _read(self) -> None:
        from .models import ApiToken, RevokedToken

        started = timezone.now()
        rows = RevokedToken.objects.filter(expires_at__gt=started)
        if self._since is not None:
            rows = rows.filter(revoked_at__gte=self._since - OVERLAP)
        for key_hash, end in rows.values_list("key_hash", "expires_at"):
            self._ends[key_hash] = end.timestamp()
        if self._pruned_at is None or started - self._pruned_at > OVERLAP:
            # Ended tokens fail on their own: forget them, so the map holds only what matters.
            cutoff = started.timestamp()
            self._ends = {key: end for key, end in self._ends.items() if end > cutoff}
            self._pruned_at = started
        # Read whole each time, not since the last read: a deactivation leaves no trace but
        # the flag. A deactivation by save() revokes the tokens, so this is empty but for
        # users deactivated by an update.
        inactive = ApiToken.objects.filter(user__is_active=False, expires_at__gt=started)
        self._inactive = frozenset(inactive.values_list("key_hash", flat=True))
        self._since = started
        self._read_at = self.clock()


revocations = Revocations()
