"""Bearer tokens that are checked without a database query.

A token names its user, its end and its number among the user's tokens (its stamp), signed
with the secret key: ``<user id>.<end, unix seconds>.<stamp>.<random>:<signature>``
(``django.core.signing``, so a key rotation through ``SECRET_KEY_FALLBACKS`` keeps the tokens
working). Checking one costs a signature, a hash and two lookups: a purchase or a draw under ``redis_lua`` then reads
nothing of the database at all, where the query for the token's user cost more than the
Lua script that does the sale.

The database still holds every token, as its SHA-256 only (``ApiToken``), to list and
revoke them. A token deleted before its end (logout, a password change, the user
deactivated or deleted, revoked by its owner, dropped for a newer one) moves its user's
``TokenCutoff``: every token of the user stamped at or below it is refused but those still
held, which the row names. One row per user, however many tokens were revoked: a client
that logs in and out in a loop costs every process one entry, not one per token. Every
process reads the cutoffs written since its last read at most
``API_TOKEN_REVOCATIONS_REFRESH_SECONDS`` before it trusts a token, and at once after a
revocation of its own: a revocation holds everywhere within that bound.
The same read takes the changes of users' ``is_active`` since the last one (``ActiveChange``,
written by database triggers: ``accounts.triggers``), and refuses every token of a user
inactive now: a user deactivated by a ``QuerySet.update`` (no signal, nothing revoked) is
refused within that bound too, and gets its tokens back if reactivated the same way, as
Django's sessions do. A read costs what changed since the last, never the tokens or users
the site holds.
A process that has not managed to read them for ``API_TOKEN_REVOCATIONS_STALE_SECONDS``
refuses every token with a 503 rather than trust one that may have been revoked.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core import signing
from django.db import DatabaseError

from core.errors import Unavailable

from .triggers import database_now

SALT = "accounts.tokens"
# A token as issued is about 90 characters; anything much longer is not one of ours, and
# not worth a signature's work.
MAX_LENGTH = 200
# How far back each read of the revocations looks beyond the last one: a revocation is
# stamped when it is written, and commits a little after that. Stamps and reads go by the
# database's clock (``revocations_clock``): a process' own could be a minute off another's,
# and a revocation stamped by a slow one was older than every read's window.
OVERLAP = timedelta(seconds=60)
# A change of is_active is deleted this long after its end (``token_issue`` does so). A
# process whose last read is older than half of it may have missed some that are gone, and
# reads again every change that has not ended, as it does at its first read.
CHANGES_KEPT = timedelta(hours=1)
# The wall clock that decides whether a token has ended: replaceable in tests.
wall_clock: Callable[[], float] = time.time
# The clock the revocations are stamped and read by: the database's, replaceable in tests.
revocations_clock: Callable[[], datetime] = database_now


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


def token_new(*, user_id: int, stamp: int, expires_at: datetime) -> str:
    """A token for ``user_id``, numbered ``stamp``, that works until ``expires_at`` (to the
    second, rounded down)."""
    end = int(expires_at.timestamp())
    return _signer().sign(f"{user_id}.{end}.{stamp}.{secrets.token_urlsafe(16)}")


@dataclass(frozen=True)
class Claims:
    """What a token with a valid signature says."""

    user_id: int
    expires_at: int  # unix seconds
    stamp: int
    key_hash: str


def token_claims(raw: str, *, now: float | None = None) -> Claims | None:
    """The claims of ``raw`` if its signature is ours and it has not ended at ``now`` (unix
    seconds, the clock's by default); None otherwise. Says nothing of revocation."""
    if len(raw) > MAX_LENGTH:
        return None
    try:
        value = _signer().unsign(raw)
        user_id, end, stamp, _nonce = value.split(".")
        claims = Claims(user_id=int(user_id), expires_at=int(end), stamp=int(stamp), key_hash=token_hash(raw))
    except (signing.BadSignature, ValueError):
        return None
    if claims.expires_at <= (wall_clock() if now is None else now):
        return None
    return claims


@dataclass(frozen=True)
class Cutoff:
    """A user's ``TokenCutoff`` as read: tokens stamped ``stamp`` or below are refused, but
    those ``spared``; it refuses nothing once ``ends`` (unix seconds) has passed."""

    stamp: int
    spared: frozenset[int]
    ends: float

    def refuses(self, claims: Claims) -> bool:
        return claims.stamp <= self.stamp and claims.stamp not in self.spared


class Revocations:
    """The users' token cutoffs that have not ended yet, as this process last read them (one
    per process: see :data:`revocations`), and the users inactive then whose tokens are
    refused. ``clock`` is monotonic, replaceable in tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._reading = threading.Lock()
        self.forget()

    def revoked(self, claims: Claims) -> bool:
        """Whether the token of ``claims`` was revoked or its user is inactive, reading the
        revocations first when the last read is older than the refresh interval."""
        age = None if self._read_at is None else self.clock() - self._read_at
        if self._soon or age is None or age >= settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS:
            try:
                # One read at a time: a threaded server's requests (runserver, the tests' live
                # server) would prune the maps while another read wrote them.
                with self._reading:
                    self._read()
            except DatabaseError as exc:
                self._soon = True  # the next check tries again
                if age is None or age >= settings.API_TOKEN_REVOCATIONS_STALE_SECONDS:
                    raise RevocationsUnknown() from exc
        cutoff = self._cutoffs.get(claims.user_id)
        return (cutoff is not None and cutoff.refuses(claims)) or claims.user_id in self._inactive

    def forget(self) -> None:
        """Forget what was read: the next check reads it all again, as a process just started."""
        self._cutoffs: dict[int, Cutoff] = {}
        self._inactive: dict[int, float] = {}  # user id: the latest end of its tokens (unix seconds)
        self._read_at: float | None = None  # by ``clock``: the last read that went through
        self._soon = False  # read before the next check (``read_soon``)
        self._since: datetime | None = None  # the wall time the last read started
        self._pruned_at: datetime | None = None

    def read_soon(self) -> None:
        """Read again before the next check (this process has just revoked a token: the
        read then sees it, and sees nothing if the revocation was rolled back). The copy's
        age still counts from the last read that went through: a read that fails then
        keeps trusting a fresh copy as any other does, not 503 at once."""
        self._soon = True

    def _read(self) -> None:
        from .models import TokenCutoff

        self._soon = False  # before it reads: a revocation made meanwhile asks again
        started = revocations_clock()
        # Kept an overlap past their end by the database's clock: a token's own end is judged
        # by this host's (``wall_clock``), which may run a little slow.
        rows = TokenCutoff.objects.filter(expires_at__gt=started - OVERLAP)
        if self._since is not None:
            rows = rows.filter(changed_at__gte=self._since - OVERLAP)
        # Each row is the user's whole cutoff as it is now: the last read of it wins.
        for user_id, stamp, spared, ends in rows.values_list("user_id", "stamp", "spared", "expires_at"):
            self._cutoffs[user_id] = Cutoff(stamp, frozenset(map(int, spared.split())), ends.timestamp())
        self._inactive_read(started)
        if self._pruned_at is None or started - self._pruned_at > OVERLAP:
            # A cutoff whose tokens have all ended refuses nothing the end does not: forget it,
            # so the map holds only what matters; an inactive user's likewise, or a process
            # that reads every second, never the whole again, kept every user ever deactivated.
            now = (started - OVERLAP).timestamp()
            self._cutoffs = {user_id: cutoff for user_id, cutoff in self._cutoffs.items() if cutoff.ends > now}
            self._inactive = {user_id: ends for user_id, ends in self._inactive.items() if ends > now}
            self._pruned_at = started
        self._since = started
        self._read_at = self.clock()

    def _inactive_read(self, started: datetime) -> None:
        from .models import ActiveChange

        # Each change comes with its user's is_active as it is now, so the order the changes
        # are read in does not matter; a user deleted since has no row to join, and its
        # tokens were revoked as they went. An inactive user is kept until the latest end of
        # the changes read of it (the end of its tokens), and changed in place: a read costs
        # what changed, not a copy of every inactive user.
        whole = self._since is None or started - self._since > CHANGES_KEPT / 2
        if whole:
            changes, inactive = ActiveChange.objects.filter(expires_at__gt=started - OVERLAP), {}
        else:
            changes, inactive = ActiveChange.objects.filter(changed_at__gte=self._since - OVERLAP), self._inactive
        for user_id, active, ends in changes.values_list("user_id", "user__is_active", "expires_at"):
            if active:
                inactive.pop(user_id, None)
            else:
                inactive[user_id] = max(inactive.get(user_id, 0.0), ends.timestamp())
        self._inactive = inactive


revocations = Revocations()
