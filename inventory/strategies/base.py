"""What every strategy shares: the take, the fixed sequence that runs it, and its helpers.

Stock is taken in one place, under each concurrency strategy, for any product: one
module per strategy in this package (``none.py``, ``db_atomic.py``, ...), each over this
base, and the registry in ``__init__.py``.

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

A :class:`Change` is the other half of a unit's life (docs/design.md, "Lifecycle"): one
held record settled (paid, claimed) or released (cancelled, expired, forfeited: its unit
back in the stock). It runs a sequence of its own, under the same guard and write scope
as the take: **read** whether the record is still held, pause ``RACE_WINDOW_MS``, and
**write** its new status, with the unit's return in the same transaction. A guarded
strategy's write changes only a record still held, so of a pay and an expiry racing, or
two expiries, exactly one writes; ``none`` and ``local`` write whatever they read, so
they can pay and release one record, or release it twice.

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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet

from core.errors import DomainError
from core.ratelimit import RateCount
from locking.lease import LeasedLock

from ..errors import InvalidQuantity, LockBusy, SoldOut
from ..models import Stock, StockGroup
from ..records import SETTLED, Record
from ..reservation_types import Reserved, group_tag

R = TypeVar("R")

STOCK_NOT_NEGATIVE = "stock_quantity_not_negative"

# The statuses of a record that holds its unit: the stock row's ``taken`` counts them.
TAKING = (Record.Status.HELD, *SETTLED)

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
        user_key: the scope of the per-user rule, such as ``"voucher:3:user:7"``;
            lock-based strategies lock it.
        check: raises the caller's domain error when the per-user rule refuses
            (already bought, draw limit). Runs first under the guard.
        record: writes the order or award in the same transaction as the stock
            write and returns it. Called as ``record(stock_id, guarded)``: the row
            taken (None when the chooser took nothing) and whether the strategy is
            guarded, that is whether to write the database backstop key.
        quantity: units to take, at least 1.

    What a deferred strategy (``redis_lua``) reads, reserving in the request and leaving
    the record to a worker:
        kind, item_id: the item, for the worker asked to persist or rebuild it.
        over_limit: raised when the user has used every take.
        reserved: the answer, given the reservation: the record as it will be, pending.
        rand: the weighted choice's uniform number in [0, 1), called only to reserve; a
            system random one when None.

    What an unguarded strategy (``none``, ``local``) reads to keep the running totals of
    takes past the per-user rule (``over_counted``), since only its writes make them:
        counted: the user's records of the item that count against the rule, now.
        allowed: how many the rule allows (1 a voucher, the draw limit of a pool).
    """

    group_id: int
    choose: Chooser
    user_key: str
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
    allowed: int = 1


@dataclass(frozen=True)
class Change:
    """One change of one held record, as the core's holds (``inventory.holds``) say it.

    Attributes:
        records: the record's own queryset (its model filtered by its primary key).
        target: the status it changes to.
        fields: the other fields written with the status (when, whose take it frees).
        stock_id: the row its unit goes back to; None for a settle, or a record that took
            nothing.
        group_id, user_key: the take's, so that a strategy guards the change with what
            guarded the take (its transaction, the group's rows, the user's lock).
        still_before: for a settle, the deadline must still be after it: a guarded
            strategy does not settle a hold that lapsed between its check and its write.
        kind, record_id, user_id: the record, for a strategy that keeps stock
            outside the database (``redis_lua`` returns the unit there too).
        frees_take: whether a release gives the user the take back (a voucher's buyer
            may buy again; a forfeited draw still counts).
        unit_field: the record's lookup of the stock row it took, read by an unguarded
            write, which may change a record that is not held any more.
        counted, allowed: as a ``Take``'s, for the running totals of an unguarded write.
    """

    records: QuerySet
    target: str
    group_id: int
    user_key: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    stock_id: int | None = None
    still_before: datetime | None = None
    kind: str = ""
    record_id: int = 0
    user_id: int = 0
    frees_take: bool = False
    unit_field: str = ""
    counted: Callable[[], int] | None = None
    allowed: int = 1

    @property
    def releases(self) -> bool:
        return "released_at" in self.fields


class Returned(NamedTuple):
    """A record released just now, and the row its unit went back to (None: it took none)."""

    record_id: int
    user_id: int
    stock_id: int | None


def change_write(change: Change, *, guarded: bool) -> bool:
    """Write ``change``: the record's new status and, for a release, its unit back in the
    stock, in the caller's transaction. Guarded, only a record still held changes, so one
    change of many racing writes; unguarded, whatever was read is written.

    The stock row's running total of units taken follows what the record became: a record
    that stops holding its unit gives it back to ``taken``, one that holds it again (an
    unguarded pay of a record released meanwhile) takes it again. A guarded write changes
    only a held record, so only its release moves the total; an unguarded one reads, under
    the record's row lock, what it is about to overwrite."""
    records = change.records
    if guarded:
        records = records.filter(status=Record.Status.HELD)
        if change.still_before is not None:
            records = records.filter(hold_until__gt=change.still_before)
    fields = dict(change.fields)
    returns = change.releases and change.stock_id is not None
    if change.releases:
        fields["releases"] = F("releases") + 1
    # The stock row first, as a take writes it before its record: two transactions that
    # lock the two in opposite orders deadlock (a cancel against a purchase of the unit).
    if returns:
        lock_rows([change.stock_id])
    if guarded:
        was, unit = Record.Status.HELD, change.stock_id
    else:
        was, unit = _read_overwritten(change)
    if not records.update(status=change.target, **fields):
        return False
    # +1: the record holds its unit again; -1: it gave it back; 0: no change.
    taken = int(change.target in TAKING) - int(was in TAKING)
    if returns:
        Stock.objects.filter(pk=change.stock_id).update(**units_back(1, taken=-taken))
    elif unit is not None and taken:
        Stock.objects.filter(pk=unit).update(taken=F("taken") + taken)
    if not guarded and change.frees_take and change.counted is not None:
        over_counted(change, delta=taken)
    return True


def _read_overwritten(change: Change) -> tuple[str | None, int | None]:
    """The status an unguarded write is about to overwrite, and the stock row the record
    holds, read under the record's row lock so that racing writes read one another's. The
    stock row is locked before the record, as every take and release locks them."""
    unit = change.records.values_list(change.unit_field, flat=True).first() if change.unit_field else change.stock_id
    if unit is not None and unit != change.stock_id:
        lock_rows([unit])
    return change.records.select_for_update().values_list("status", flat=True).first(), unit


def units_out(units: int) -> dict[str, Any]:
    """The fields of a stock row's UPDATE when ``units`` leave it for records: its running
    total of units taken moves with the stock, in the same statement."""
    return {"quantity": F("quantity") - units, "taken": F("taken") + units, "version": F("version") + 1}


def units_back(units: int, *, taken: int | None = None) -> dict[str, Any]:
    """The fields of a stock row's UPDATE when ``units`` come back to it from records that
    held ``taken`` of them (all, unless an unguarded write returns one twice)."""
    taken = units if taken is None else taken
    return {"quantity": F("quantity") + units, "taken": F("taken") - taken, "version": F("version") + 1}


def over_counted(guarded_by: Take | Change, *, delta: int) -> None:
    """Keep the group's running totals of takes beyond the per-user rule, after an
    unguarded write moved the user's count of records that count against it by ``delta``.
    The group's row is locked before the count, so the writes of one item count in turn,
    each seeing those committed before it: an exact total however they race."""
    if delta == 0:
        return
    list(StockGroup.objects.select_for_update().filter(pk=guarded_by.group_id).values_list("pk", flat=True))
    counted = guarded_by.counted()
    allowed, before = guarded_by.allowed, counted - delta
    takes = max(0, counted - allowed) - max(0, before - allowed)
    takers = int(counted > allowed) - int(before > allowed)
    if takes or takers:
        StockGroup.objects.filter(pk=guarded_by.group_id).update(
            over_takes=F("over_takes") + takes, over_takers=F("over_takers") + takers
        )


def lock_rows(stock_ids: list[int]) -> None:
    """Lock stock rows in primary-key order for the caller's transaction (a no-op outside
    one, and on SQLite, whose transactions hold its one write lock)."""
    list(Stock.objects.select_for_update().filter(pk__in=stock_ids).order_by("pk").values_list("pk", flat=True))


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
    :meth:`guard`, :meth:`read` and :meth:`write`.

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
            if not self.change_read(change, held):
                return False
            race_window()
            with self.writing(change, held):
                return change_write(change, guarded=self.guarded)

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
                    if chosen is None or self.write(take, held, chosen, remaining):
                        record = take.record(chosen, self.guarded)
                        if not self.guarded and take.counted is not None:
                            over_counted(take, delta=1)
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
