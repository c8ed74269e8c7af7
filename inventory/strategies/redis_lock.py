"""A per-user lock and a per-group lock from ``locking``, both released after COMMIT;
every stock write carries the group lock's fence.

The user lock is the guard: it fails fast (one buyer firing twice at once is told
``busy``) and is held for the whole take. The read and choice happen under it
(the caller's snapshot on the first attempt); the group lock is taken for the
write, queueing buyers in arrival order for up to ``LOCK_WAIT_SECONDS``. Once
held, the fenced conditional UPDATE writes the chosen row; should that row have
run out since the read, the take reads and chooses again while still holding the
group lock, so the second choice is made on exact stock and cannot miss. A held record is
settled or released under the user's lock, by an UPDATE conditional on its status. One lock
name per group (``stock-group:<id>``), and per bucket of a bucketed item
(``stock-group:<id>:<bucket>``, bucket 0 keeping the group's name): fences are per name, and a
row never changes bucket, so every row is always written under the same name.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache

from django.conf import settings
from django.db import transaction
from redis.exceptions import RedisError

from core.faultpoints import fault_point
from core.namespace import key_prefix
from locking import Lock, LockLost, StaleFence
from locking.integration import FencedUpdate, locks_redis
from locking.lease import LeasedLock

from ..errors import LockBusy
from ..models import Stock, Strategy
from .base import Held, StockStrategy, Take, read_remaining, sold_out_on_negative_stock, units_out

logger = logging.getLogger(__name__)


def _let_go(lock: LeasedLock) -> None:
    """Release ``lock`` once the transaction is over. Redis out of reach then is no failure of
    the take: the COMMIT is done (or rolled back) and the lease ends the lock on its own.
    Raised, it answered 503 for a take that was made, whose retry under its idempotency key
    would take again."""
    try:
        lock.release()
    except RedisError as exc:
        logger.warning("Could not release the lock %s (%s): its lease ends it.", lock.label, exc)


def stock_lock_name(group_id: int, bucket: int | None) -> str:
    """The lock of a group's rows, or of one bucket's: bucket 0 keeps the group's name, which
    its row was always written under, so that an item split later keeps its fences."""
    return f"stock-group:{group_id}" if not bucket else f"stock-group:{group_id}:{bucket}"


@lru_cache(maxsize=4096)
def fenced_decrement(stock_id: int, quantity: int) -> FencedUpdate:
    """The fenced ``quantity -= n`` of one stock row, compiled once per process.

    Compiled outside the group lock, since under it every queued buyer would wait
    for the ORM, and only once, since its SQL differs between holders only by the
    fence, which ``FencedUpdate.run`` fills in.
    """
    return FencedUpdate(
        Stock.objects.filter(pk=stock_id, quantity__gte=quantity),
        **units_out(quantity),
    )


class RedisLockStrategy(StockStrategy):
    name = Strategy.REDIS_LOCK

    def max_attempts(self) -> int:
        return 2

    def _lock(self, name: str, **options) -> LeasedLock:
        return Lock(locks_redis(), name, key_prefix=key_prefix(), lease=settings.LOCK_LEASE_SECONDS, **options)

    def _user_lock(self, name: str) -> LeasedLock:
        # Unfenced: it guards the rule and writes nothing, so it leaves no counter per buyer.
        return self._lock(name, blocking=False, fenced=False)

    @contextmanager
    def guard(self, take: Take) -> Iterator[Held]:
        held = Held()
        try:
            with self._held(self._user_lock(take.user_key)):
                yield from self._transaction(held)
        except (LockLost, StaleFence) as exc:
            raise LockBusy() from exc  # nothing was committed; the buyer may retry

    def _transaction(self, held: Held) -> Iterator[Held]:
        """Commit under the group lock, release it, then switch autocommit back on.

        Django's ``atomic`` would spend a round trip on ``SET autocommit=0`` as it
        opens and another on ``SET autocommit=1`` after the COMMIT, the latter while
        the group lock is still held. So autocommit goes off before anything is
        read, the COMMIT or ROLLBACK is issued under the lock, and autocommit comes
        back on after the lock is released, which also runs the ``on_commit``
        hooks. Inside a caller's own ``atomic`` block the take is a savepoint of
        that transaction instead.

        On SQLite, autocommit off leaves the driver to open the transaction itself,
        deferred, at the first write: the stock write under the group lock, or the
        record. A transaction that begins with a write takes SQLite's one write lock
        at once, as ``BEGIN IMMEDIATE`` would, and waits for it (the ``timeout``)
        instead of failing; the check and read before it are plain reads under the
        user's lock, as READ COMMITTED makes them on MySQL too.
        """
        connection = transaction.get_connection()
        if connection.in_atomic_block:
            try:
                with transaction.atomic():
                    yield held
            finally:
                self._release_group(held)
            return
        connection.set_autocommit(False)
        try:
            try:
                yield held
                if held.group_lock is not None:
                    held.group_lock.check()  # a lease lost before commit rolls the take back
                connection.commit()
            except BaseException:
                connection.rollback()
                raise
            finally:
                self._release_group(held)
        finally:
            connection.set_autocommit(True)

    @staticmethod
    def _release_group(held: Held) -> None:
        if held.group_lock is not None:
            _let_go(held.group_lock)
            held.group_lock = None

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        if attempt == 0 and held.snapshot is not None:
            return held.snapshot
        return read_remaining(take.group_id, take.quantity, held.bucket)

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        decrement = fenced_decrement(stock_id, take.quantity)
        if held.group_lock is None:
            name = stock_lock_name(take.group_id, held.bucket)
            group_lock = self._lock(name, blocking_timeout=settings.LOCK_WAIT_SECONDS)
            if group_lock.acquire() is None:
                raise LockBusy()
            held.group_lock = group_lock
        # Where the fault runner stops a holder past its lease: its write must then be refused.
        fault_point("group-lock-held")
        with sold_out_on_negative_stock():
            return bool(decrement.run(held.group_lock))

    @staticmethod
    @contextmanager
    def _held(lock: LeasedLock) -> Iterator[LeasedLock]:
        if lock.acquire() is None:
            raise LockBusy()
        try:
            yield lock
        finally:
            _let_go(lock)
