"""The thin Django side of ``locking``: the lock client from settings, a system check,
and fenced writes through the ORM.

Settings: ``LOCK_REDIS_URL`` (one server), ``LOCK_REDIS_URLS`` (Redlock servers).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading

import redis
from django.conf import settings
from django.core.checks import Error, register
from django.db import connections, transaction
from django.db.models import Max, QuerySet
from django.db.models.sql import UpdateQuery
from redis.backoff import NoBackoff
from redis.retry import Retry

from .errors import LockError, StaleFence

logger = logging.getLogger(__name__)

# How far past the highest fence written a counter that went back is moved: beyond the
# fences its lost Redis may have handed out and not yet seen written (a holder's fence is
# counted at its acquire, written at its write, and failed attempts burn numbers too), so
# that a holder from before the restart cannot write after one from after it.
FENCE_GAP = 1_000_000

_clients: dict[tuple[str, bool], tuple[int, redis.Redis]] = {}
_clients_guard = threading.Lock()


def locks_redis(url: str | None = None) -> redis.Redis:
    """The process's lock connection pool for ``url`` (default ``LOCK_REDIS_URL``).

    A plain redis-py client: unlike a cache client it never swallows an error. Every call
    is bounded, so that a Redis that is down or hangs fails the request instead of holding
    it: connecting by ``LOCK_CONNECT_TIMEOUT`` (2 s), a reply by ``LOCK_SOCKET_TIMEOUT``
    (one second past the lease: a waiter's ``BLPOP`` never waits longer than a holder's
    lease). No retry behind the caller's back: redis-py's default (three, backing off up
    to 10 s) kept a request waiting for a Redis that was down, and a repeated script call
    may take stock twice. A connection the server closed (Redis restarted) is replaced
    when it is taken from the pool, without a retry.
    """
    return _pooled(url or settings.LOCK_REDIS_URL, redlock=False)


def _pooled(url: str, *, redlock: bool) -> redis.Redis:
    """The process's client of ``url``, of the lock servers' options (a Redlock server's)."""
    with _clients_guard:
        pid, client = _clients.get((url, redlock), (0, None))
        if client is None or pid != os.getpid():
            client = redis.Redis.from_url(url, **locks_redis_options(redlock=redlock))
            _clients[(url, redlock)] = (os.getpid(), client)
        return client


# The share of the lease a Redlock server is given to answer: a server that hangs (stopped,
# its packets dropped) costs an acquire, and each renewal, that much, and the others answer
# the majority. Redlock never blocks on a server (it polls), so nothing waits longer.
REDLOCK_SERVER_SHARE = 0.1


def redlock_redis(url: str) -> redis.Redis:
    """The process's connection pool to one Redlock server: :func:`locks_redis`'s, but a
    reply waited for ``REDLOCK_SERVER_SHARE`` of the lease, not a lease and a second. With
    that, one hung server of three made every acquire wait past its lease (no validity left)
    and held up the watchdog's renewals of every lock of the process."""
    return _pooled(url, redlock=True)


def locks_redis_options(*, redlock: bool = False) -> dict:
    """The timeouts and retry policy of :func:`locks_redis` (``redlock``: of
    :func:`redlock_redis`), from the settings."""
    lease = float(getattr(settings, "LOCK_LEASE_SECONDS", 5))
    connect = float(getattr(settings, "LOCK_CONNECT_TIMEOUT", 2))
    reply = float(getattr(settings, "LOCK_SOCKET_TIMEOUT", None) or lease + 1)
    if redlock:
        reply = lease * REDLOCK_SERVER_SHARE
        connect = min(connect, reply)
    return {
        "socket_connect_timeout": connect,
        "socket_timeout": reply,
        "retry": Retry(NoBackoff(), 0),
        "health_check_interval": 30,
    }


class FencedUpdate:
    """An ``UPDATE`` of ``queryset`` compiled now and run later, under a lock, only if no
    newer holder of that lock has written the rows.

    Compiling a queryset update costs the ORM several times what the database
    spends running it (measured here: 0.5 ms against 0.14 ms for the same SQL),
    and under a lock every queued waiter pays for that time. Build the update
    before acquiring, run it once the lock is held::

        update = FencedUpdate(Stock.objects.filter(pk=1, quantity__gte=1), quantity=F("quantity") - 1)
        with Lock(client, "stock:1") as lock:
            update.run(lock)

    Arguments:
        queryset: the rows to write, with any conditions of their own; a row that
            fails them is simply not written.
        fence_field: the column holding the newest fence that wrote each row.
        updates: the field values, as for ``QuerySet.update``.
    """

    def __init__(self, queryset: QuerySet, *, fence_field: str = "fence", **updates) -> None:
        self.queryset = queryset
        self.fence_field = fence_field
        # Fences count up from 1; a random number above 2**62, which no fence reaches
        # and every integer column holds, stands for the fence in the compiled
        # parameters and is swapped for the holder's fence when run.
        placeholder = 2**62 + secrets.randbits(61)
        query = queryset.filter(**{f"{fence_field}__lt": placeholder}).query.chain(UpdateQuery)
        query.add_update_values({fence_field: placeholder, **updates})
        query.clear_select_clause()
        compiler = query.get_compiler(queryset.db)
        compiler.pre_sql_setup()
        self.sql, params = compiler.as_sql()
        self.params = list(params)
        self.fence_slots = [index for index, value in enumerate(self.params) if value == placeholder]
        if len(self.fence_slots) != 2:
            raise ValueError(f"cannot prepare a fenced update of {queryset.model.__name__} on {fence_field!r}")

    def run(self, lock) -> int:
        """Write with ``lock.fence``; return the number of rows written.

        Raises StaleFence (and tells ``lock.metrics``) when a row exists but carries a
        fence at least as new, and the lock is no longer ours: the caller had lost it. A row
        carrying the holder's own fence (the holding writes it twice, or a counter that
        started again met the row's number) is written with the next fence, moved by one.
        When the lock is still ours, the fence counter went back instead (its Redis
        restarted empty and counts from 1 again): the counter is moved past the rows'
        fence by ``FENCE_GAP`` (``lock.raise_fence``) and the write runs once more with
        the new fence.
        """
        if not getattr(lock, "fenced", True):
            raise LockError("an unfenced lock (fenced=False) counts no fence to write with")
        written = self._execute(lock.fence)
        if written:
            return written
        highest = self.queryset.aggregate(highest=Max(self.fence_field))["highest"]
        if highest is None or highest < lock.fence:
            return 0  # no such row, or the rows' own conditions failed
        raise_fence = getattr(lock, "raise_fence", None)
        behind = highest > lock.fence  # else the row carries this fence: no sign of a lost counter
        fence = raise_fence(highest + (FENCE_GAP if behind else 0)) if raise_fence is not None else None
        if fence is not None:
            if behind:
                logger.warning(
                    "the fence counter of %r was behind the database (%s); its Redis lost it: now %s",
                    getattr(lock, "label", ""), highest, fence,
                )  # fmt: skip
            written = self._execute(fence)
            if written or not self.queryset.filter(**{f"{self.fence_field}__gte": fence}).exists():
                return written
        metrics = getattr(lock, "metrics", None)
        if metrics is not None:
            metrics.stale_fence(getattr(lock, "label", ""), fence=lock.fence)
        raise StaleFence(f"fence {lock.fence} is stale for {self.queryset.model.__name__}")

    def _execute(self, fence: int) -> int:
        params = list(self.params)
        for index in self.fence_slots:
            params[index] = fence
        with transaction.mark_for_rollback_on_error(using=self.queryset.db):
            with connections[self.queryset.db].cursor() as cursor:
                cursor.execute(self.sql, params)
                return cursor.rowcount


def fenced_update(queryset: QuerySet, *, lock, fence_field: str = "fence", **updates) -> int:
    """Compile and run a :class:`FencedUpdate` at once, for a write made outside a hot path."""
    return FencedUpdate(queryset, fence_field=fence_field, **updates).run(lock)


@register()
def lock_connection_check(app_configs, **kwargs):
    """The lock server must be a real Redis that answers, reached by a client that raises."""
    errors = []
    for url in [settings.LOCK_REDIS_URL, *getattr(settings, "LOCK_REDIS_URLS", [])]:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            errors.append(Error(f"Lock URL {url!r} is not a redis:// URL.", id="locking.E001"))
            continue
        try:
            probe = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2, retry=Retry(NoBackoff(), 0))
            info = probe.info("server")
        except (redis.RedisError, OSError) as exc:
            errors.append(Error(f"Lock server {url} does not answer: {exc}", id="locking.E002"))
            continue
        if "redis_version" not in info:
            errors.append(Error(f"Lock server {url} is not Redis.", id="locking.E003"))
    return errors
