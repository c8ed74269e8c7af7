"""Issuing and revoking bearer tokens, and creating many load-test users fast."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from core.errors import DomainError

from . import tokens as token_module
from .crowd import crowd_join, crowd_leave
from .models import ActiveChange, ApiToken, TokenCutoff, token_expiry
from .permissions import permissions_named
from .tokens import CHANGES_KEPT, OVERLAP, revocations, token_hash, token_new

# Users whose tokens ``tokens_revoke`` deletes and records at a time: within a statement's
# parameters on every database (SQLite's included).
TOKENS_REVOKED_USERS = 1000
# How old the oldest stamp a transaction wrote may grow before the next revocation it
# records stamps them all again (``_written``): a quarter of the readers' window, which
# leaves the transaction the rest of it (45 s) to commit after its last revocation.
RESTAMP_AFTER = OVERLAP / 4


class TokenNotFound(DomainError):
    code = "not_found"
    status = 404
    default_message = "You have no such token."


class LoginOutdated(DomainError):
    """The user's password or ``is_active`` changed between the check of the login and its
    token: the change revoked every token the user held then, and must not spare this one."""

    code = "unauthorized"
    status = 401
    default_message = "The account changed during the login: log in again."


def _new_token(*, user_id: int, stamp: int, expires_at) -> tuple[str, str]:
    raw = token_new(user_id=user_id, stamp=stamp, expires_at=expires_at)
    return raw, token_hash(raw)


def tokens_owners_locked(*, user_ids, fields: tuple[str, ...] = ("pk",)) -> list[tuple]:
    """Lock the users' rows, in primary-key order, and read their ``fields``: every change of
    a user's tokens holds its row first (issuing, revoking, deleting), so that their stamps
    and cutoffs never race."""
    return list(
        get_user_model()
        ._default_manager.select_for_update()
        .filter(pk__in=list(user_ids))
        .order_by("pk")
        .values_list(*fields)
    )


def _stamp_next(*, user_id: int) -> int:
    """The stamp of the user's next token: above each of theirs and above their cutoff, so
    that no cutoff already read refuses it."""
    held = ApiToken.objects.filter(user_id=user_id).aggregate(top=Max("stamp"))["top"] or 0
    cut = TokenCutoff.objects.filter(user_id=user_id).values_list("stamp", flat=True).first() or 0
    return max(held, cut) + 1


def _expiry(ttl: timedelta | None):
    # To the second: the end signed into the token, and the row's, are the same.
    return (token_expiry() if ttl is None else timezone.now() + ttl).replace(microsecond=0)


@transaction.atomic
def token_issue(*, user, ttl: timedelta | None = None) -> str:
    """A new bearer token for ``user``, working for ``ttl`` (``API_TOKEN_TTL_SECONDS`` by
    default); the raw value is returned once and never stored.

    The user's expired tokens go, and the oldest beyond ``API_TOKENS_PER_USER`` with them:
    every login issues a token, and a client that logs in on every run would otherwise
    leave a trail of tokens that all still work. So do the revocations and the changes of
    ``is_active`` that no process needs any longer (``accounts.tokens``).

    ``LoginOutdated`` when the user's password or ``is_active`` in the database is not the
    ``user``'s any more: a change committed since its login was checked revoked every token
    then, and issuing after it would hand the old password a working token.
    """
    expires_at = _expiry(ttl)
    if tokens_owners_locked(user_ids=[user.pk], fields=("password", "is_active")) != [(user.password, user.is_active)]:
        raise LoginOutdated()
    stamp = _stamp_next(user_id=user.pk)
    raw, digest = _new_token(user_id=user.pk, stamp=stamp, expires_at=expires_at)
    token = ApiToken.objects.create(user=user, key_hash=digest, stamp=stamp, expires_at=expires_at)
    now = timezone.now()
    ApiToken.objects.filter(user=user, expires_at__lte=now).delete()
    # Kept a while past their end: a process forgets a cutoff up to a minute after it
    # (``accounts.tokens.OVERLAP``), and the stamps above it must stay above it till then.
    # A thousand of each at most, under this user's lock: the rest are left to the next
    # logins, as are the rows another transaction holds (a revocation upserting them).
    for model in (TokenCutoff, ActiveChange):
        ended = model.objects.filter(expires_at__lte=now - CHANGES_KEPT).select_for_update(skip_locked=True)
        model.objects.filter(pk__in=list(ended.values_list("pk", flat=True)[:1000])).delete()
    kept = ApiToken.objects.filter(user=user).order_by("-created_at", "-pk").values_list("pk", flat=True)
    surplus = list(kept[max(settings.API_TOKENS_PER_USER, 1) :])
    if surplus:
        ApiToken.objects.filter(pk__in=surplus).exclude(pk=token.pk).delete()
    return raw


@transaction.atomic
def token_revoke(*, user, token_id: int) -> None:
    """Revoke one of ``user``'s tokens; another user's is not found, as if it did not exist."""
    tokens_owners_locked(user_ids=[user.pk])
    deleted, _ = ApiToken.objects.filter(pk=token_id, user=user).delete()
    if not deleted:
        raise TokenNotFound()


@transaction.atomic
def token_revoke_raw(*, user, raw: str) -> bool:
    """Revoke the token ``raw`` if it is ``user``'s (logging out); whether one was."""
    tokens_owners_locked(user_ids=[user.pk])
    deleted, _ = ApiToken.objects.filter(key_hash=token_hash(raw), user=user).delete()
    return bool(deleted)


@transaction.atomic
def user_tokens_revoke(*, user_id: int) -> int:
    """Revoke every token of the user (the password changed); the number revoked. Locked
    before its tokens are read: a token issued meanwhile is among them."""
    tokens_owners_locked(user_ids=[user_id])
    deleted, _ = ApiToken.objects.filter(user_id=user_id).delete()
    return deleted


@transaction.atomic
def users_with_tokens_create(
    *,
    count: int,
    prefix: str = "load",
    password: str | None = None,
    staff: bool = False,
    permissions: Sequence[str] = (),
    ttl: timedelta | None = None,
    crowd: bool = True,
) -> list[tuple[str, str]]:
    """Create ``count`` users named ``<prefix>-<batch>-<n>`` with one token each, working
    for ``ttl`` (``API_TOKEN_TTL_SECONDS`` by default). ``permissions`` (``app_label.codename``)
    are given to each: a member of staff calls the staff API only with the call's permission.

    With ``crowd`` they join the load crowd (``accounts.crowd``): they may buy and draw
    the load runs' unlisted items, which no one else may.

    Returns ``(username, token)`` pairs. One bulk insert per table and one password
    hash shared by all (hashing per user would take minutes for thousands); the
    users cannot log in with a password unless ``password`` is given.
    """
    if count < 1:
        raise ValueError("count must be at least 1")
    granted = permissions_named(permissions)
    User = get_user_model()
    batch = secrets.token_hex(3)  # lets the command run again without name clashes
    names = [f"{prefix}-{batch}-{n}" for n in range(1, count + 1)]
    hashed = make_password(password)  # unusable when password is None
    User.objects.bulk_create([User(username=name, password=hashed, is_staff=staff) for name in names], batch_size=1000)
    users = User.objects.filter(username__in=names).only("id", "username")
    pairs, tokens = [], []
    expires_at = _expiry(ttl)
    for user in users:
        raw, digest = _new_token(user_id=user.pk, stamp=1, expires_at=expires_at)  # their first
        pairs.append((user.username, raw))
        tokens.append(ApiToken(user=user, key_hash=digest, stamp=1, expires_at=expires_at))
    ApiToken.objects.bulk_create(tokens, batch_size=1000)
    Grant = User.user_permissions.through
    Grant.objects.bulk_create([Grant(user=user, permission=p) for user in users for p in granted], batch_size=1000)
    if crowd:
        crowd_join(user_ids=[user.pk for user in users])
    return pairs


class _Written:
    """The users whose cutoffs one transaction has written, and the oldest stamp among them
    not stamped again since. Registered with ``on_commit`` as a mark of its transaction."""

    def __init__(self, oldest) -> None:
        self.users: set[int] = set()
        self.oldest = oldest

    def __call__(self) -> None:
        pass


def _written(now) -> _Written:
    """What this connection's transaction has written of the cutoffs. Its mark leaves the
    connection's ``on_commit`` list when the transaction commits or rolls back (or the
    savepoint it was made in does), and with it what it recorded."""
    written = getattr(connection, "_revocations_written", None)
    if written is None or not any(entry[1] is written for entry in connection.run_on_commit):
        written = connection._revocations_written = _Written(now)
        transaction.on_commit(written)
    return written


def tokens_revocations_record(*, tokens: Sequence[ApiToken]) -> None:
    """Record ``tokens``, just deleted, as revoked until their end, in the transaction that
    deleted them, for every process to learn (``accounts.tokens``): each user's cutoff rises
    to the highest stamp among them and spares the tokens the user still holds below it.
    This process reads the revocations again before its next check. Called for every
    deleted token, whichever way it went (``accounts.signals``, ``tokens_revoke``).

    A handful of queries for any number of tokens and users."""
    now = token_module.revocations_clock()  # the stamp every process reads by
    cut: dict[int, tuple[int, object]] = {}  # user id: (highest stamp revoked, latest end)
    for token in tokens:
        if token.expires_at > now - OVERLAP:  # ended by the database's clock, maybe not by a host's
            stamp, ends = cut.get(token.user_id, (0, token.expires_at))
            cut[token.user_id] = (max(stamp, token.stamp), max(ends, token.expires_at))
    if not cut:
        return
    tokens_owners_locked(user_ids=cut)
    for cutoff in TokenCutoff.objects.filter(user_id__in=list(cut)):
        stamp, ends = cut[cutoff.user_id]
        cut[cutoff.user_id] = (max(stamp, cutoff.stamp), max(ends, cutoff.expires_at))
    spared: dict[int, list[int]] = {user_id: [] for user_id in cut}
    held = ApiToken.objects.filter(user_id__in=list(cut), expires_at__gt=now).order_by("stamp")
    for user_id, stamp in held.values_list("user_id", "stamp"):
        if stamp <= cut[user_id][0]:
            spared[user_id].append(stamp)
    rows = [
        TokenCutoff(
            user_id=user_id, stamp=stamp, spared=" ".join(map(str, spared[user_id])), changed_at=now, expires_at=ends
        )
        for user_id, (stamp, ends) in sorted(cut.items())  # locked in key order, as the users were
    ]
    # An upsert, not an update of the rows read: issuing purges other users' ended cutoffs
    # without their locks. MySQL names no conflict target (its one unique key here); SQLite must.
    TokenCutoff.objects.bulk_create(
        rows,
        batch_size=1000,
        update_conflicts=True,
        unique_fields=["user_id"] if connection.features.supports_update_conflicts_with_target else None,
        update_fields=["stamp", "spared", "changed_at", "expires_at"],
    )
    # A revocation is stamped when it is written, but seen from its commit on, and every
    # process reads from OVERLAP before its last read: a transaction that committed its
    # stamps more than OVERLAP after writing them (the tokens' admin deleting thousands, one
    # signal each, or a bulk delete of users) was behind every process that read meanwhile,
    # and its tokens kept working there until a restart. Django has no hook just before a
    # commit, so every revocation a transaction records restamps, with the database's clock
    # now, every cutoff it wrote before once the oldest stamp among them is RESTAMP_AFTER
    # old: one UPDATE per thousand users at most every RESTAMP_AFTER, and every stamp it
    # commits within RESTAMP_AFTER of its last revocation. A queryset's delete records its
    # tokens last and commits a few statements later; ``tokens_revoke`` commits each
    # thousand users at once.
    written = _written(now)
    if written.oldest <= now - RESTAMP_AFTER:
        earlier = sorted(written.users - cut.keys())
        for first in range(0, len(earlier), 1000):
            TokenCutoff.objects.filter(user_id__in=earlier[first : first + 1000]).update(changed_at=now)
        written.oldest = now
    written.users.update(cut)
    revocations.read_soon()


def tokens_revoke(*, username_prefix: str) -> int:
    """Delete every token of the users whose name starts with ``username_prefix`` (a load
    run's crowd, once it is over); the number deleted. Deleted in bulk and their revocations
    recorded in bulk, a thousand users at a time, rather than a receiver's few queries for
    each of thousands of tokens. Each thousand commits on its own: a revocation stamped
    and committed long after (a crowd of 100,000 in one transaction) would land behind the
    window every process reads (``accounts.tokens.OVERLAP``). Run again, it revokes the rest."""
    if not username_prefix:
        raise ValueError("a prefix is needed: revoking every token is not what this is for")
    users = get_user_model()._default_manager.filter(username__startswith=username_prefix)
    ids = list(users.order_by("pk").values_list("pk", flat=True))
    deleted = 0
    table = connection.ops.quote_name(ApiToken._meta.db_table)
    with connection.cursor() as cursor:
        for start in range(0, len(ids), TOKENS_REVOKED_USERS):
            chunk = ids[start : start + TOKENS_REVOKED_USERS]
            with transaction.atomic():
                tokens_owners_locked(user_ids=chunk)
                tokens = list(ApiToken.objects.filter(user_id__in=chunk).only("user_id", "stamp", "expires_at"))
                for first in range(0, len(tokens), 1000):
                    batch = [token.pk for token in tokens[first : first + 1000]]
                    cursor.execute(f"DELETE FROM {table} WHERE id IN ({', '.join(['%s'] * len(batch))})", batch)
                    deleted += cursor.rowcount
                tokens_revocations_record(tokens=tokens)
    return deleted


def users_retire(*, username_prefix: str) -> int:
    """Retire a load run's users once it is over: their tokens revoked, out of the crowd,
    no permission, not staff, inactive; the number retired.

    Deactivated rather than deleted: their orders and draws are the run's evidence (the
    lab's item pages show them, oversell included), and those records protect their
    user. Inactive, with no token and no usable password, such a user can do nothing.
    """
    if not username_prefix:
        raise ValueError("a prefix is needed: retiring every user is not what this is for")
    users = get_user_model().objects.filter(username__startswith=username_prefix)
    ids = list(users.values_list("pk", flat=True))
    tokens_revoke(username_prefix=username_prefix)
    crowd_leave(user_ids=ids)
    get_user_model().user_permissions.through.objects.filter(user_id__in=ids).delete()
    return users.update(is_active=False, is_staff=False)
