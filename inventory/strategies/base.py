"""What every strategy shares: the take, the fixed sequence that runs it, and its helpers.

Stock is taken in one place, under each concurrency strategy, for any product: one
module per strategy in this package (``none.py``, ``db_atomic.py``, ...), each over this
base, and the registry in ``__init__.py``.

A :class:`Take` names a stock group (the candidate rows: a voucher's rows, every
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

A ``Change`` (``changes.py``) is the other half of a unit's life (docs/design.md, "Lifecycle"): one
held record settled (paid, claimed) or released (cancelled, expired, forfeited: its unit
back in the stock). It runs a sequence of its own, under the same guard and write scope
as the take: **read** whether the record is still held, pause ``RACE_WINDOW_MS``, and
**write** its new status, with the unit's return in the same transaction. A guarded
strategy's write changes only a record still held, so of a pay and an expiry racing, or
two expiries, exactly one writes; ``none`` and ``local`` write whatever they read, so
they can pay and release one record, or release it twice.

An ``Expiry`` (``changes.py``) releases an item's held records past their deadline, a batch
at a time: each strategy owns it (``StockStrategy.expire``), as it owns its take and its
change. A guarded strategy releases a batch in one transaction (``expiry_write``), each
record only while still held; ``none`` and ``local`` release each record by their change,
their naive way; ``redis_lua`` returns the batch's units to Redis too. Every return of a
unit to a stock row, one record's or a batch's, is one write (``units_return``).

Steps 6 and 7 run inside the strategy's **write scope**: nothing more for a strategy
whose guard already is the transaction, and the transaction of the write for ``none``
and ``local``, which guard nothing with a transaction. Their check and read are plain
autocommit queries, as naive code's are, and only the write and the record commit
together; so they race on every database, SQLite included, whose transactions here
begin ``IMMEDIATE`` and would otherwise serialise the whole take.

Each strategy supplies only its guard, read and write (and, if it needs one, its write
scope), in a module of its own. The products' adapters (``orders.product``, ``lottery.product``) own
the rules, and ``inventory.take`` is the one entry point; strategies
own only the concurrency.

``guarded`` strategies write the record with its database backstop key (the unique
constraint behind the per-user rule); ``none`` and ``local`` do not, or the
demonstration that they break would prove nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F

from core.errors import DomainError
from core.ratelimit import RateCount
from locking.lease import LeasedLock

from ..errors import InvalidQuantity, LockBusy, SoldOut
from ..models import Stock
from ..records import Record
from ..redis_lua.values import Reserved, group_tag
from .changes import Change, Expiry, change_write, expiry_write, lock_group, over_counted, rule_scope

R = TypeVar("R")

STOCK_NOT_NEGATIVE = "stock_quantity_not_negative"

Chooser = Callable[[Mapping[int, int]], "int | None"]


@dataclass(frozen=True)
class Take(Generic[R]):
    """One attempt to take ``quantity`` units from one row of a stock group, for one user:
    what the product's adapter (``inventory.product.Product.take``) says of it.

    What every strategy reads:
        group_id: the ``StockGroup`` whose rows are the candidates.
        user_id: the user who takes.
        rate: the request's rate limits (``core.ratelimit``), counted on the group first:
            ``RateLimited`` (429) when over one, and nothing taken. None counts nothing.

    What the strategies that take in the request read:
        admit: refuses what can be refused before any guard, from what the item was read
            with (the window; stock read at zero, after the per-user rule so that a user
            who has used every take hears that) and returns ``{stock_id: remaining}`` as
            it read them, unguarded, or None. Strategies whose own read is unguarded use
            that snapshot for their first attempt instead of reading again.
        choose: given ``{stock_id: remaining}`` of the rows that still have at least
            ``quantity`` units (never empty), returns the id of the row to take, or
            None to take nothing and still record (a draw that lands on "no prize").
            It runs under the strategy's guard, on the stock the guard protects.
        check: raises the caller's domain error when the per-user rule refuses
            (already bought, draw limit). Runs first under the guard.
        record: writes the order or award in the same transaction as the stock
            write and returns it. Called as ``record(stock_id, guarded)``: the row
            taken (None when the chooser took nothing) and whether the strategy is
            guarded, that is whether to write the database backstop key.
        quantity: units to take, at least 1.

    What a deferred strategy (``redis_lua``) reads, reserving in the request and leaving
    the record to a worker:
        kind, item_id: the item, for the worker asked to persist or rebuild it; with
            ``user_id``, the scope of the per-user rule (:attr:`user_key`).
        over_limit: raised when the user has used every take.
        reserved: the answer, given the reservation: the record as it will be, pending.
        rand: the weighted choice's uniform number in [0, 1), called only to reserve; a
            system random one when None.

    What an unguarded strategy (``none``, ``local``) reads to keep the running totals of
    takes past the per-user rule (``over_counted``), since only its writes make them:
        counted: the user's records of the item that count against the rule, now.
        allowed: how many the rule allows (1 a voucher, the draw limit of a pool), read
            under the group's lock.
    """

    group_id: int
    choose: Chooser
    check: Callable[[], None]
    record: Callable[[int | None, bool], R]
    user_id: int = 0
    rate: RateCount | None = None
    admit: Callable[[], Mapping[int, int] | None] = lambda: None
    quantity: int = 1
    kind: str = ""
    item_id: int = 0
    over_limit: Callable[[], DomainError] | None = None
    reserved: Callable[[Reserved], R] | None = None
    rand: Callable[[], float] | None = None
    counted: Callable[[], int] | None = None
    allowed: Callable[[], int] | None = None

    @property
    def user_key(self) -> str:
        """The scope of the per-user rule, which lock-based strategies lock: named as every
        change of what the take took names it (``changes.rule_scope``)."""
        return rule_scope(self.kind, self.item_id, self.user_id)


def units_out(units: int) -> dict[str, Any]:
    """The fields of a stock row's UPDATE when ``units`` leave it for records: its running
    total of units taken moves with the stock, in the same statement."""
    return {"quantity": F("quantity") - units, "taken": F("taken") + units, "version": F("version") + 1}


def choose_first(remaining: Mapping[int, int]) -> int:
    """The chooser of a voucher, whatever its group's rows: the first with stock, in
    primary-key order."""
    return min(remaining)


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
def sold_out_on_negative_stock() -> Iterator[None]:
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
    # What the take's ``admit`` read, unguarded, before the guard.
    snapshot: Mapping[int, int] | None = None


def read_remaining(group_id: int, quantity: int) -> dict[int, int]:
    return dict(
        Stock.objects.filter(group_id=group_id, quantity__gte=quantity).order_by("id").values_list("id", "quantity")
    )


class StockStrategy:
    """The fixed sequence of a take (see the module docstring); subclasses supply
    :meth:`guard`, :meth:`read` and :meth:`write`. A held record's change (:meth:`change`)
    and the expiry of an item's due holds (:meth:`expire`) run under the same guards; a
    strategy that releases otherwise overrides them.

    Class attributes:
        name: the strategy's one name (``inventory.models.Strategy``).
        guarded: whether records carry their database backstop key.
        breaks: ``None`` for a safe strategy; ``"always"`` when it is expected to
            break an invariant under concurrency; ``"across_processes"`` when it
            holds in one process and breaks across several.
        sheds_load: whether contention is answered ``busy`` rather than queued, so
            that while buyers are refused some stock may still be left.
        deferred: whether the request only reserves and a worker writes the record
            later (``redis_lua``): its take replaces the whole sequence below, and its
            answer is a pending record.

    Behaviour only: how the pages word a strategy lives with the pages (``inventory.texts``).
    """

    name: ClassVar[str]
    guarded: ClassVar[bool] = True
    breaks: ClassVar[str | None] = None
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

    def change_read(self, change: Change, held: Held) -> bool:
        """Whether the record is still held, read under the guard (a plain read here)."""
        return change.records.filter(status=Record.Status.HELD).exists()

    def change(self, change: Change) -> bool:
        """Settle or release one held record (the module docstring); False when it was no
        longer held, and nothing is written."""
        with self.guard(change) as held:
            if self.guarded and change.counts_over(guarded=True):
                lock_group(change.group_id)  # before the stock row its read may lock
            if not self.change_read(change, held):
                return False
            race_window()
            with self.writing(change, held):
                return change_write(change, guarded=self.guarded)

    def expire(self, expiry: Expiry) -> int:
        """Release up to ``expiry.batch`` of one item's held records past their deadline;
        the number released. One transaction (``expiry_write``) that locks the group's row
        (where takes past the per-user rule are counted), then the stock rows, then the
        records it can (``SKIP LOCKED``), and changes each only while still held: of sweeps,
        tasks and single releases racing, one releases each record."""
        return len(expiry_write(expiry))

    def take(self, take: Take[R]) -> R:
        if isinstance(take.quantity, bool) or not isinstance(take.quantity, int) or take.quantity < 1:
            raise InvalidQuantity()
        if take.rate is not None:
            take.rate.count(tag=group_tag(take.group_id))
        snapshot = take.admit()
        with self.guard(take) as held:
            held.snapshot = snapshot
            take.check()
            for attempt in range(self.max_attempts()):
                remaining = self.read(take, held, attempt)
                chosen = self._choose(take, remaining)
                if attempt == 0:
                    race_window()
                with self.writing(take, held):
                    counts_over = not self.guarded and take.counted is not None
                    if counts_over:
                        lock_group(take.group_id)  # before the stock row, as every writer of both
                    if chosen is None or self.write(take, held, chosen, remaining):
                        record = take.record(chosen, self.guarded)
                        if counts_over:
                            over_counted(take.group_id, counted=take.counted, allowed=take.allowed, delta=1)
                        return record
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
def in_transaction() -> Iterator[Held]:
    with transaction.atomic():
        yield Held()
