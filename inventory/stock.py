"""The one place where stock is decremented, under each concurrency strategy.

A strategy takes a :class:`Take` (which stock, how much, whose rule to check, how
to record the result) and runs the check and the write under its own concurrency
control. Callers (``orders.services``, later ``lottery.services``) own the rules;
strategies own only the concurrency. Every strategy pauses ``RACE_WINDOW_MS``
between the check and the write, the same for all of them, so that a small
machine reproduces the race reliably.

``guarded`` strategies write the order with its backstop key (the unique
constraint that allows one order per user); ``none`` and ``local`` do not, or the
demonstration that they oversell would prove nothing.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar, Generic, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.db.models import F

from locking import Lock, LockLost, StaleFence
from locking.integration import FencedUpdate, lock_client
from locking.lease import LeasedLock
from locking.redlock import Redlock

from .errors import InvalidQuantity, LockBusy, SoldOut
from .models import Stock, Strategy

R = TypeVar("R")

STOCK_NOT_NEGATIVE = "stock_quantity_not_negative"


@dataclass(frozen=True)
class Take(Generic[R]):
    """One attempt to take ``quantity`` units of a stock for one user.

    Attributes:
        stock_id: the ``Stock`` row to decrement.
        quantity: units to take, at least 1.
        user_key: the scope of the per-user rule, such as ``"voucher:3:user:7"``;
            lock-based strategies lock it together with the item.
        check: raises the caller's domain error when the per-user rule refuses
            (already bought, draw limit). Runs inside the strategy's guard, except
            under ``db_atomic``, where it is a plain read and the record's
            backstop decides.
        record: writes the order or award in the same transaction as the stock
            write and returns it. Its argument says whether the strategy is
            guarded, that is whether to write the database backstop key.
    """

    stock_id: int
    quantity: int
    user_key: str
    check: Callable[[], None]
    record: Callable[[bool], R]


def race_window() -> None:
    """Sleep ``RACE_WINDOW_MS`` between the check and the write."""
    pause_ms = settings.RACE_WINDOW_MS
    if pause_ms > 0:
        time.sleep(pause_ms / 1000)


def constraint_violated(exc: IntegrityError, name: str) -> bool:
    """Whether ``exc`` was raised by the database constraint called ``name``.

    MySQL and MariaDB name the constraint (or the unique key) in the message;
    SQLite names the columns of a unique index, so callers pass a name that
    matches either.
    """
    return name in str(exc)


@contextmanager
def _sold_out_on_negative_stock():
    try:
        yield
    except IntegrityError as exc:
        if constraint_violated(exc, STOCK_NOT_NEGATIVE):
            raise SoldOut() from exc
        raise


class StockStrategy:
    name: ClassVar[str]
    guarded: ClassVar[bool] = True

    def take(self, take: Take[R]) -> R:
        raise NotImplementedError


class NaiveStrategy(StockStrategy):
    """Read the stock, check it, write ``stock - n`` from Python: the textbook race."""

    name = Strategy.NONE
    guarded = False

    def take(self, take: Take[R]) -> R:
        with transaction.atomic():
            take.check()
            quantity = Stock.objects.values_list("quantity", flat=True).get(pk=take.stock_id)
            if quantity < take.quantity:
                raise SoldOut()
            race_window()
            # An absolute write: a concurrent buyer's decrement is silently lost.
            Stock.objects.filter(pk=take.stock_id).update(quantity=quantity - take.quantity, version=F("version") + 1)
            return take.record(self.guarded)


class LocalLockStrategy(NaiveStrategy):
    """The naive code inside a ``threading.Lock`` per item: safe in one process only."""

    name = Strategy.LOCAL
    guarded = False

    def __init__(self) -> None:
        self._locks: dict[int, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def _lock_for(self, stock_id: int) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(stock_id, threading.Lock())

    def take(self, take: Take[R]) -> R:
        # Held until after commit, so the next holder in this process sees the write.
        with self._lock_for(take.stock_id):
            return super().take(take)


class PessimisticStrategy(StockStrategy):
    """``SELECT ... FOR UPDATE`` on the stock row: buyers of one item queue on the row."""

    name = Strategy.DB_PESSIMISTIC

    def take(self, take: Take[R]) -> R:
        with transaction.atomic():
            quantity = Stock.objects.select_for_update().values_list("quantity", flat=True).get(pk=take.stock_id)
            take.check()
            if quantity < take.quantity:
                raise SoldOut()
            race_window()
            with _sold_out_on_negative_stock():
                Stock.objects.filter(pk=take.stock_id).update(
                    quantity=F("quantity") - take.quantity, version=F("version") + 1
                )
            return take.record(self.guarded)


class OptimisticStrategy(StockStrategy):
    """Compare-and-set on the version column, retried a bounded number of times.

    A lost compare-and-set writes nothing; after ``OPTIMISTIC_MAX_ATTEMPTS`` losses
    the buyer is told ``busy`` rather than queued, so the strategy sheds load.
    """

    name = Strategy.DB_OPTIMISTIC

    def take(self, take: Take[R]) -> R:
        attempts = max(1, settings.OPTIMISTIC_MAX_ATTEMPTS)
        for attempt in range(attempts):
            with transaction.atomic():
                quantity, version = Stock.objects.values_list("quantity", "version").get(pk=take.stock_id)
                take.check()
                if quantity < take.quantity:
                    raise SoldOut()
                race_window()
                with _sold_out_on_negative_stock():
                    won = Stock.objects.filter(pk=take.stock_id, version=version).update(
                        quantity=F("quantity") - take.quantity, version=F("version") + 1
                    )
                if won:
                    return take.record(self.guarded)
            # Jittered exponential back-off so the losers do not collide again in step.
            time.sleep(random.uniform(0, 0.002 * (2**attempt)))
        raise LockBusy()


class AtomicStrategy(StockStrategy):
    """One conditional ``UPDATE ... SET quantity = quantity - n WHERE quantity >= n``."""

    name = Strategy.DB_ATOMIC

    def take(self, take: Take[R]) -> R:
        # The record's backstop (for orders, the unique key on voucher and buyer)
        # guards the per-user rule here, as the conditional UPDATE guards the stock;
        # the check is a plain read that spares a refused buyer the transaction.
        take.check()
        race_window()
        with transaction.atomic():
            with _sold_out_on_negative_stock():
                taken = Stock.objects.filter(pk=take.stock_id, quantity__gte=take.quantity).update(
                    quantity=F("quantity") - take.quantity, version=F("version") + 1
                )
            if not taken:
                raise SoldOut()
            return take.record(self.guarded)


@lru_cache(maxsize=1024)
def fenced_decrement(stock_id: int, quantity: int) -> FencedUpdate:
    """The fenced ``quantity -= n`` of one stock row, compiled once per process.

    Compiled outside the item lock, since under it every queued buyer would wait
    for the ORM, and only once, since its SQL differs between holders only by the
    fence, which ``FencedUpdate.run`` fills in.
    """
    return FencedUpdate(
        Stock.objects.filter(pk=stock_id, quantity__gte=quantity),
        quantity=F("quantity") - quantity,
        version=F("version") + 1,
    )


class RedisLockStrategy(StockStrategy):
    """Per-user and per-item locks from ``locking``, taken before the transaction and
    released after it commits; the stock write carries the item lock's fence.

    The user lock fails fast (one buyer firing twice at once is told ``busy``); the
    item lock queues buyers in arrival order for up to ``LOCK_WAIT_SECONDS``.
    """

    name = Strategy.REDIS_LOCK

    def _lock(self, name: str, **options) -> LeasedLock:
        return Lock(lock_client(), name, lease=settings.LOCK_LEASE_SECONDS, **options)

    def take(self, take: Take[R]) -> R:
        with self._held(self._lock(take.user_key, blocking=False)):
            # The user lock serialises this buyer's attempts, so the per-user rule is
            # checked here, outside the item lock: other buyers never wait for it.
            take.check()
            race_window()
            decrement = fenced_decrement(take.stock_id, take.quantity)
            item_lock = self._lock(f"stock:{take.stock_id}", blocking_timeout=settings.LOCK_WAIT_SECONDS)
            try:
                return self._take_under(item_lock, decrement, take)
            except (LockLost, StaleFence) as exc:
                raise LockBusy() from exc  # nothing was committed; the buyer may retry

    def _take_under(self, item_lock: LeasedLock, decrement: FencedUpdate, take: Take[R]) -> R:
        """Lock, write, commit, unlock: in that order, with nothing else under the lock.

        Django's ``atomic`` would spend a round trip on ``SET autocommit=0`` as it
        opens and another on ``SET autocommit=1`` after the COMMIT, both while the
        lock is held. So autocommit goes off before the lock is taken (InnoDB starts
        the transaction at its first statement, once the lock is held), the COMMIT
        or ROLLBACK is issued under the lock, and autocommit comes back on after the
        lock is released, which also runs the ``on_commit`` hooks. Inside a caller's
        own ``atomic`` block the write is a savepoint of that transaction instead.
        """
        connection = transaction.get_connection()
        if connection.in_atomic_block:
            with self._held(item_lock), transaction.atomic():
                return self._write(item_lock, decrement, take)
        connection.set_autocommit(False)
        try:
            with self._held(item_lock):
                try:
                    record = self._write(item_lock, decrement, take)
                    connection.commit()
                    return record
                except BaseException:
                    connection.rollback()
                    raise
        finally:
            connection.set_autocommit(True)

    @staticmethod
    @contextmanager
    def _held(lock: LeasedLock):
        if lock.acquire() is None:
            raise LockBusy()
        try:
            yield lock
        finally:
            lock.release()

    def _write(self, item_lock: LeasedLock, decrement: FencedUpdate, take: Take[R]) -> R:
        """The critical section: the fenced conditional UPDATE and the INSERT of the record."""
        with _sold_out_on_negative_stock():
            taken = decrement.run(item_lock)
        if not taken:
            raise SoldOut()
        record = take.record(self.guarded)
        item_lock.check()  # a lease lost before commit rolls the purchase back
        return record


class RedlockStrategy(RedisLockStrategy):
    """The same locks, each held by a majority of the servers in ``LOCK_REDIS_URLS``."""

    name = Strategy.REDLOCK

    def _lock(self, name: str, **options) -> LeasedLock:
        if not settings.LOCK_REDIS_URLS:
            raise ImproperlyConfigured("The redlock strategy needs LOCK_REDIS_URLS (three or more Redis servers).")
        clients = [lock_client(url) for url in settings.LOCK_REDIS_URLS]
        return Redlock(clients, name, lease=settings.LOCK_LEASE_SECONDS, **options)


# The registry: adding a strategy is one class and one line here.
STRATEGIES: dict[str, StockStrategy] = {
    strategy.name: strategy
    for strategy in (
        NaiveStrategy(),
        LocalLockStrategy(),
        PessimisticStrategy(),
        OptimisticStrategy(),
        AtomicStrategy(),
        RedisLockStrategy(),
        RedlockStrategy(),
    )
}


def stock_take(*, strategy: str, take: Take[R]) -> R:
    """Take stock under ``strategy`` and record the result; see :class:`Take`.

    Raises ``SoldOut`` when there is not enough stock, ``LockBusy`` when the
    strategy gave up under contention, and whatever ``take.check`` raises.
    """
    if take.quantity < 1:
        raise InvalidQuantity()
    return STRATEGIES[strategy].take(take)


def stock_restock(*, stock_id: int, quantity: int) -> None:
    """Add ``quantity`` units, as one relative update that composes with any buyer.

    Never an absolute overwrite: a restock written as ``quantity = N`` would race
    the buyers decrementing the same row.
    """
    if not isinstance(quantity, int) or isinstance(quantity, bool) or quantity < 1:
        raise InvalidQuantity("Restock quantity must be a positive whole number.")
    Stock.objects.filter(pk=stock_id).update(
        quantity=F("quantity") + quantity,
        initial_quantity=F("initial_quantity") + quantity,
        version=F("version") + 1,
    )
