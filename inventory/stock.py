"""The one place where stock is taken, under each concurrency strategy, for any product.

A :class:`Take` names a stock group (the candidate rows: a voucher's one row, every
prize of a pool), a chooser, the per-user rule and a recorder. The base class
:class:`StockStrategy` owns the sequence, the same for every strategy and product:

1. enter the strategy's **guard** (a transaction, locks, or nothing at all);
2. **check** the caller's per-user rule (one order per user, the draw limit);
3. **read** the candidates' remaining units;
4. **choose** one of the rows that still have stock, or nothing (a draw that lands on
   "no prize"); with no row left the take is ``SoldOut``;
5. pause ``RACE_WINDOW_MS`` (first attempt only), the same in every strategy, so that a
   small machine reproduces the race reliably;
6. **write** the decrement of the chosen row; a strategy whose write can miss (someone
   changed what it read) says so, and the sequence goes back to step 3, a bounded
   number of times, then answers ``busy``;
7. **record** the order or award in the same transaction as the decrement, told which
   row was taken; then that transaction commits and the guard releases.

Steps 6 and 7 run inside the strategy's **write scope**: nothing more for a strategy
whose guard already is the transaction, and the transaction of the write for ``none``
and ``local``, which guard nothing with a transaction. Their check and read are plain
autocommit queries, as naive code's are, and only the write and the record commit
together; so they race on every database, SQLite included, whose transactions here
begin ``IMMEDIATE`` and would otherwise serialise the whole take.

Each strategy supplies only its guard, read and write (and, if it needs one, its write
scope). Callers (``orders.services``, ``lottery.services``) own the rules; strategies
own only the concurrency.

``guarded`` strategies write the record with its database backstop key (the unique
constraint behind the per-user rule); ``none`` and ``local`` do not, or the
demonstration that they break would prove nothing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar, Generic, TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F

from core.faultpoints import fault_point
from core.namespace import key_prefix
from locking import Lock, LockLost, StaleFence
from locking.integration import FencedUpdate, lock_client
from locking.lease import LeasedLock
from locking.redlock import Redlock

from .errors import InvalidQuantity, LockBusy, RedlockUnconfigured, SoldOut
from .models import Stock, StockGroup, Strategy

R = TypeVar("R")

STOCK_NOT_NEGATIVE = "stock_quantity_not_negative"

Chooser = Callable[[Mapping[int, int]], "int | None"]


@dataclass(frozen=True)
class Take(Generic[R]):
    """One attempt to take ``quantity`` units from one row of a stock group, for one user.

    Attributes:
        group_id: the ``StockGroup`` whose rows are the candidates.
        choose: given ``{stock_id: remaining}`` of the rows that still have at least
            ``quantity`` units (never empty), returns the id of the row to take, or
            None to take nothing and still record (a draw that lands on "no prize").
            It runs under the strategy's guard, on the stock the guard protects.
        user_key: the scope of the per-user rule, such as ``"voucher:3:user:7"``;
            lock-based strategies lock it.
        check: raises the caller's domain error when the per-user rule refuses
            (already bought, draw limit). Runs first under the guard.
        record: writes the order or award in the same transaction as the stock
            write and returns it. Called as ``record(stock_id, guarded)``: the row
            taken (None when the chooser took nothing) and whether the strategy is
            guarded, that is whether to write the database backstop key.
        quantity: units to take, at least 1.
        snapshot: ``{stock_id: remaining}`` as the caller already read it, without a
            guard. Strategies whose own read is unguarded use it for their first
            attempt instead of reading again; the others ignore it.
    """

    group_id: int
    choose: Chooser
    user_key: str
    check: Callable[[], None]
    record: Callable[[int | None, bool], R]
    quantity: int = 1
    snapshot: Mapping[int, int] | None = None


def choose_only(remaining: Mapping[int, int]) -> int:
    """The chooser of a group with one row (a voucher): that row, whenever it has stock."""
    (stock_id,) = remaining
    return stock_id


def race_window() -> None:
    """Sleep ``RACE_WINDOW_MS`` between the choice and the write."""
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
def _sold_out_on_negative_stock() -> Iterator[None]:
    try:
        yield
    except IntegrityError as exc:
        if constraint_violated(exc, STOCK_NOT_NEGATIVE):
            raise SoldOut() from exc
        raise


@dataclass
class Held:
    """What one take holds while its guard is entered; strategies keep their state here."""

    group_version: int = 0
    group_lock: LeasedLock | None = None


def _remaining(group_id: int, quantity: int) -> dict[int, int]:
    return dict(
        Stock.objects.filter(group_id=group_id, quantity__gte=quantity).order_by("id").values_list("id", "quantity")
    )


class StockStrategy:
    """The fixed sequence of a take (see the module docstring); subclasses supply
    :meth:`guard`, :meth:`read` and :meth:`write`.

    Class attributes:
        name: the strategy's one name (``inventory.models.Strategy``).
        guarded: whether records carry their database backstop key.
        breaks: ``None`` for a safe strategy; ``"always"`` when it is expected to
            break an invariant under concurrency; ``"across_processes"`` when it
            holds in one process and breaks across several.
        explanation: one line on how it guards, for pages and reports.
        why: why it breaks, or what holding costs, in a few sentences for the proof page.
        sheds_load: whether contention is answered ``busy`` rather than queued, so
            that while buyers are refused some stock may still be left.
        deferred: whether the request only reserves and a worker writes the record
            later (``redis_lua``): such a strategy has no take of its own here, and the
            products reserve through ``inventory.reserve`` instead.
    """

    name: ClassVar[str]
    guarded: ClassVar[bool] = True
    breaks: ClassVar[str | None] = None
    explanation: ClassVar[str] = ""
    why: ClassVar[str] = ""
    sheds_load: ClassVar[bool] = False
    deferred: ClassVar[bool] = False

    def max_attempts(self) -> int:
        """How many times the read-choose-write may run before ``busy``."""
        return 1

    def guard(self, take: Take) -> Iterator[Held]:
        """A context manager entered around the whole take; a guard that is the take's
        transaction commits on a clean exit."""
        raise NotImplementedError

    def writing(self, take: Take, held: Held) -> AbstractContextManager[object]:
        """A context manager around the write and the record of one attempt; commits on a
        clean exit. By default nothing: the guard's transaction already holds both."""
        return nullcontext()

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        """``{stock_id: remaining}`` of the candidates (rows without stock may be left out)."""
        raise NotImplementedError

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        """Decrement ``stock_id``; False when the write missed and the choice must be made again."""
        raise NotImplementedError

    def before_retry(self, attempt: int) -> None:
        """A pause between a missed write and the next read."""

    def take(self, take: Take[R]) -> R:
        if isinstance(take.quantity, bool) or not isinstance(take.quantity, int) or take.quantity < 1:
            raise InvalidQuantity()
        with self.guard(take) as held:
            take.check()
            for attempt in range(self.max_attempts()):
                remaining = self.read(take, held, attempt)
                chosen = self._choose(take, remaining)
                if attempt == 0:
                    race_window()
                with self.writing(take, held):
                    if chosen is None or self.write(take, held, chosen, remaining):
                        return take.record(chosen, self.guarded)
                self.before_retry(attempt)
            raise LockBusy()

    @staticmethod
    def _choose(take: Take, remaining: Mapping[int, int]) -> int | None:
        available = {stock_id: left for stock_id, left in remaining.items() if left >= take.quantity}
        if not available:
            raise SoldOut()
        chosen = take.choose(available)
        if chosen is not None and chosen not in available:
            raise ValueError(f"the chooser picked stock {chosen}, which was not a candidate with stock")
        return chosen


@contextmanager
def _in_transaction() -> Iterator[Held]:
    with transaction.atomic():
        yield Held()


class NaiveStrategy(StockStrategy):
    """Read the stock, choose, pause, write ``remaining - n`` from Python: the textbook race.

    No guard: the check ("has an order?", "draws used?") and the read are plain
    autocommit queries, and only the absolute write and the record share a
    transaction, so every buyer who read before the first write commits sees the
    same stock and writes the same number.
    """

    name = Strategy.NONE
    guarded = False
    breaks = "always"
    explanation = "reads the stock, checks it, then writes stock - 1 from Python: buyers in between all win"
    why = (
        "Every buyer who reads the stock before the first write lands sees the same number, and each "
        "writes that number minus one: the writes overwrite each other, and more orders are confirmed "
        "than there was stock. It costs nothing and guarantees nothing."
    )

    def guard(self, take: Take) -> Iterator[Held]:
        return nullcontext(Held())

    def writing(self, take: Take, held: Held) -> AbstractContextManager[object]:
        return transaction.atomic()

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        return _remaining(take.group_id, take.quantity)

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        # An absolute write: a concurrent buyer's decrement is silently lost.
        Stock.objects.filter(pk=stock_id).update(quantity=remaining[stock_id] - take.quantity, version=F("version") + 1)
        return True


class LocalLockStrategy(NaiveStrategy):
    """The naive code inside a ``threading.Lock`` per stock group: safe in one process only.

    The lock is the guard; the write and the record commit in their own transaction
    inside it, so the next holder in this process reads the committed stock. Another
    process neither sees the lock nor waits for it.
    """

    name = Strategy.LOCAL
    breaks = "across_processes"
    explanation = "the naive code inside a lock of this server process: other processes do not see it"
    why = (
        "The lock lives in one server process. gunicorn serves with several, each with a lock of its "
        "own, so buyers in different processes race exactly as with none; it holds only when a single "
        "process serves."
    )

    def __init__(self) -> None:
        self._locks: dict[int, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def _lock_for(self, group_id: int) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(group_id, threading.Lock())

    @contextmanager
    def guard(self, take: Take) -> Iterator[Held]:
        # Released after the write's commit, so the next holder in this process sees the write.
        with self._lock_for(take.group_id):
            yield Held()


class PessimisticStrategy(StockStrategy):
    """``SELECT ... FOR UPDATE`` on every row of the group, in primary-key order.

    The choice depends on every candidate's stock, so every candidate is locked,
    always in the same order so that two takes never deadlock; a restock, which
    updates a row, waits for the lock like a buyer. Buyers of one group queue.

    SQLite has no ``FOR UPDATE`` (Django leaves it out of the query there); the
    transaction's ``BEGIN IMMEDIATE`` (``config.settings.base``) takes SQLite's one
    write lock before the read instead, which guards these rows too, and every
    other row of the database with them: there every take queues behind every other.
    """

    name = Strategy.DB_PESSIMISTIC
    explanation = "SELECT ... FOR UPDATE on the stock rows: buyers queue on the rows inside the database"
    why = (
        "It holds because the second buyer's read waits for the first one's commit. The cost: the "
        "buyers of one item pass one transaction at a time, pause included, so its throughput is the "
        "lowest under a crowd; nobody is refused busy."
    )

    def guard(self, take: Take) -> Iterator[Held]:
        return _in_transaction()

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        rows = Stock.objects.select_for_update().filter(group_id=take.group_id).order_by("id")
        return dict(rows.values_list("id", "quantity"))

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        with _sold_out_on_negative_stock():
            Stock.objects.filter(pk=stock_id).update(quantity=F("quantity") - take.quantity, version=F("version") + 1)
        return True


class OptimisticStrategy(StockStrategy):
    """Compare-and-set on the group's version, retried a bounded number of times.

    The choice read every candidate, so the compare covers every candidate: the
    group's version, which this strategy's writes and every restock bump. A lost
    compare-and-set writes nothing; after ``OPTIMISTIC_MAX_ATTEMPTS`` losses the
    buyer is told ``busy`` rather than queued, so the strategy sheds load.
    """

    name = Strategy.DB_OPTIMISTIC
    sheds_load = True
    explanation = "reads a version, writes only if it has not changed, retries a few times, then answers busy"
    why = (
        "It holds because a write based on a stale read changes nothing. The cost: under a crowd most "
        "writers lose and retry, and after a few losses the buyer hears busy while stock may be left; "
        "it suits low contention."
    )

    def max_attempts(self) -> int:
        return max(1, settings.OPTIMISTIC_MAX_ATTEMPTS)

    def guard(self, take: Take) -> Iterator[Held]:
        return _in_transaction()

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        rows = list(
            Stock.objects.filter(group_id=take.group_id).order_by("id").values_list("id", "quantity", "group__version")
        )
        held.group_version = rows[0][2] if rows else 0
        return {stock_id: quantity for stock_id, quantity, _ in rows}

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        won = StockGroup.objects.filter(pk=take.group_id, version=held.group_version).update(version=F("version") + 1)
        if not won:
            return False
        with _sold_out_on_negative_stock():
            Stock.objects.filter(pk=stock_id).update(quantity=F("quantity") - take.quantity, version=F("version") + 1)
        return True

    def before_retry(self, attempt: int) -> None:
        # Jittered exponential back-off so the losers do not collide again in step.
        time.sleep(random.uniform(0, 0.002 * (2**attempt)))


class AtomicStrategy(StockStrategy):
    """One conditional ``UPDATE ... SET quantity = quantity - n WHERE quantity >= n``.

    The read is unguarded (the caller's own snapshot on the first attempt), and the
    conditional UPDATE is the guard of the stock. When it misses (the chosen row ran
    out since the read), the take reads again and chooses again, at most
    ``ATOMIC_MAX_ATTEMPTS`` times, then answers ``busy``. What that does to a draw's
    odds under contention: each choice is weighted by stock that may be up to one
    race window old, and a draw whose prize ran out meanwhile draws again from the
    newer stock. No unit is ever awarded that is not there, but while stock is
    falling fast the odds lag behind it: prizes (rather than "no prize") come out
    slightly more often than the exact odds of that instant would give.

    The per-user rule is guarded by the record's backstop (for orders, the unique key
    on voucher and buyer); the check is a plain read that spares a refused buyer the
    write.
    """

    name = Strategy.DB_ATOMIC
    explanation = "one conditional UPDATE ... WHERE stock >= 1: the database refuses the write that would oversell"
    why = (
        "It holds because the database checks and decrements in one statement. The cost is one row "
        "lock for the length of that statement's transaction and nothing held between requests: "
        "usually the fastest database strategy."
    )

    def max_attempts(self) -> int:
        return max(1, settings.ATOMIC_MAX_ATTEMPTS)

    def guard(self, take: Take) -> Iterator[Held]:
        return _in_transaction()

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        if attempt == 0 and take.snapshot is not None:
            return take.snapshot
        return _remaining(take.group_id, take.quantity)

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        with _sold_out_on_negative_stock():
            taken = Stock.objects.filter(pk=stock_id, quantity__gte=take.quantity).update(
                quantity=F("quantity") - take.quantity, version=F("version") + 1
            )
        return bool(taken)


@lru_cache(maxsize=4096)
def fenced_decrement(stock_id: int, quantity: int) -> FencedUpdate:
    """The fenced ``quantity -= n`` of one stock row, compiled once per process.

    Compiled outside the group lock, since under it every queued buyer would wait
    for the ORM, and only once, since its SQL differs between holders only by the
    fence, which ``FencedUpdate.run`` fills in.
    """
    return FencedUpdate(
        Stock.objects.filter(pk=stock_id, quantity__gte=quantity),
        quantity=F("quantity") - quantity,
        version=F("version") + 1,
    )


class RedisLockStrategy(StockStrategy):
    """A per-user lock and a per-group lock from ``locking``, both released after COMMIT;
    every stock write carries the group lock's fence.

    The user lock is the guard: it fails fast (one buyer firing twice at once is told
    ``busy``) and is held for the whole take. The read and choice happen under it
    (the caller's snapshot on the first attempt); the group lock is taken for the
    write, queueing buyers in arrival order for up to ``LOCK_WAIT_SECONDS``. Once
    held, the fenced conditional UPDATE writes the chosen row; should that row have
    run out since the read, the take reads and chooses again while still holding the
    group lock, so the second choice is made on exact stock and cannot miss. One lock
    name per group (``stock-group:<id>``): fences are per name, so every row of a
    group is always written under the same name.
    """

    name = Strategy.REDIS_LOCK
    explanation = "a Redis lock per buyer and per item, held from before the write until after the commit"
    why = (
        "It holds because buyers of one item queue in Redis and every write carries a fencing token, "
        "so a holder whose lease ran out cannot write. The cost: lock and unlock round trips to Redis, "
        "and one Redis server to depend on."
    )

    def max_attempts(self) -> int:
        return 2

    def _lock(self, name: str, **options) -> LeasedLock:
        return Lock(lock_client(), name, key_prefix=key_prefix(), lease=settings.LOCK_LEASE_SECONDS, **options)

    @contextmanager
    def guard(self, take: Take) -> Iterator[Held]:
        held = Held()
        try:
            with self._held(self._lock(take.user_key, blocking=False)):
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
            held.group_lock.release()
            held.group_lock = None

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        if attempt == 0 and take.snapshot is not None:
            return take.snapshot
        return _remaining(take.group_id, take.quantity)

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        decrement = fenced_decrement(stock_id, take.quantity)
        if held.group_lock is None:
            group_lock = self._lock(f"stock-group:{take.group_id}", blocking_timeout=settings.LOCK_WAIT_SECONDS)
            if group_lock.acquire() is None:
                raise LockBusy()
            held.group_lock = group_lock
        # Where the fault runner stops a holder past its lease: its write must then be refused.
        fault_point("group-lock-held")
        with _sold_out_on_negative_stock():
            return bool(decrement.run(held.group_lock))

    @staticmethod
    @contextmanager
    def _held(lock: LeasedLock) -> Iterator[LeasedLock]:
        if lock.acquire() is None:
            raise LockBusy()
        try:
            yield lock
        finally:
            lock.release()


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """A misconfiguration, said once per process rather than once per request."""
    if message not in _warned:
        _warned.add(message)
        logging.getLogger(__name__).warning(message)


class RedlockStrategy(RedisLockStrategy):
    """The same locks, each held by a majority of the servers in ``LOCK_REDIS_URLS``."""

    name = Strategy.REDLOCK
    explanation = "the same Redis locks, each held on a majority of independent Redis servers"
    why = (
        "It holds as redis_lock does, and keeps holding when a minority of its Redis servers is lost. "
        "The cost: every lock and unlock is a round trip to each server."
    )

    def _lock(self, name: str, **options) -> LeasedLock:
        if not settings.LOCK_REDIS_URLS:
            _warn_once("redlock: LOCK_REDIS_URLS names no Redis servers; its items answer 503 until it does")
            raise RedlockUnconfigured()
        clients = [lock_client(url) for url in settings.LOCK_REDIS_URLS]
        return Redlock(clients, name, key_prefix=key_prefix(), lease=settings.LOCK_LEASE_SECONDS, **options)


class RedisLuaStrategy(StockStrategy):
    """One Lua script checks and reserves in Redis; a Celery worker writes the records.

    Nothing of the sequence above runs in the request: the script checks the window,
    the user's takes and the stock, chooses, decrements and appends the pending
    reservation, atomically (``inventory.lua``), and the API answers 202. The records
    and the stock rows' decrement are written in batches by a worker
    (``inventory.persist``). The products reserve through ``inventory.reserve``.
    """

    name = Strategy.REDIS_LUA
    deferred = True
    explanation = "one Lua script checks and reserves in Redis; a Celery worker writes the order afterwards (202)"
    why = (
        "It holds because Redis runs one script at a time: no buyer's check and decrement can "
        "interleave with another's. The cost moves out of the request: the buyer hears 202 (pending) "
        "and a worker writes the records in batches, so Redis holds the sale until then. Redis must "
        "not evict its keys, and a missing state is rebuilt from the database; until then buyers hear "
        "503, never a sale from nothing."
    )

    def take(self, take: Take[R]) -> R:
        raise TypeError("redis_lua reserves in Redis (inventory.reserve); it has no take in the request")


# The registry. Adding a strategy takes its class and a line here, its choice in
# inventory.models.Strategy, and a migration in each product (orders, lottery), whose
# strategy fields list the choices (docs/design.md, "Strategies").
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
        RedisLuaStrategy(),
    )
}


def strategy_names(*, breaks: str | None | bool = True, deferred: bool | None = None) -> list[str]:
    """Strategy names in registry order. ``breaks=True`` (the default) lists all;
    ``None`` only the safe ones; ``"always"`` or ``"across_processes"`` those that
    break that way. ``deferred`` keeps only the strategies that are (True) or are not
    (False) deferred; None, the default, keeps both."""
    return [
        name
        for name, strategy in STRATEGIES.items()
        if (breaks is True or strategy.breaks == breaks) and (deferred is None or strategy.deferred == deferred)
    ]


def stock_take(*, strategy: str, take: Take[R]) -> R:
    """Take stock under ``strategy`` and record the result; see :class:`Take`.

    Raises ``SoldOut`` when no candidate has the units, ``LockBusy`` when the
    strategy gave up under contention, and whatever ``take.check`` raises. On any
    error nothing is written.
    """
    return STRATEGIES[strategy].take(take)
