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
   row was taken, and check the user's abandoned holds of the item (``abandon_refuse``);
   then that transaction commits and the guard releases.

A ``Change`` (``changes.py``, docs/design.md "Lifecycle") settles a held record or releases
it (its unit back in the stock), under the take's guard and write scope: **read** whether
it is still held, pause ``RACE_WINDOW_MS``, **write** its status and the unit's return in one
transaction. A guarded write changes only a record still held (of racing changes, one
writes); ``none`` and ``local`` write what they read, and may release a record twice. An
``Expiry`` releases an item's due holds a batch at a time, each strategy its own way
(``StockStrategy.expire``); every return of units to a row is one write (``units_return``).

Steps 6 and 7 run inside the strategy's **write scope**: nothing more for a strategy whose
guard is the transaction; for ``none`` and ``local`` the write's own transaction, their check
and read being plain autocommit queries, as naive code's are: so they race on every
database, SQLite included (whose transactions here begin ``IMMEDIATE``).

Each strategy supplies only its guard, read and write (and its write scope, if it needs one),
in a module of its own; the products' adapters own the rules, ``inventory.take`` is the one
entry point.
``guarded`` strategies write the record with its database backstop key (the unique constraint
behind the per-user rule); ``none`` and ``local`` do not, or their break would prove nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from math import ceil
from typing import Any, ClassVar, Generic, TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Expression, F, QuerySet

from core.errors import DomainError
from core.ratelimit import RateCount
from locking.lease import LeasedLock

from ..admission.tickets import TicketHeld
from ..buckets import Route, home_route
from ..errors import AbandonLimit, CoolingDown, InvalidQuantity, LockBusy, SoldOut
from ..models import Abandoned, Stock
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
        ticket: on an item with a waiting room, the request's ticket (``TicketHeld``): spent
            first, the rate limits counted in its round trip (``redis_lua``'s in RESERVE).

    What the strategies that take in the request read:
        admit: refuses what can be refused before any guard, from what the item was read
            with (the window; stock read at zero, after the per-user rule) and returns
            ``{stock_id: remaining}`` as read, unguarded, or None: the first attempt's
            snapshot of the strategies whose own read is unguarded.
        choose: given ``{stock_id: remaining}`` of the rows that still have at least
            ``quantity`` units (never empty), returns the id of the row to take, or
            None to take nothing and still record (a draw that lands on "no prize").
            It runs under the strategy's guard, on the stock the guard protects.
        check: raises the caller's domain error when the per-user rule refuses
            (already bought, draw limit). Runs first under the guard.
        record: writes the order or award in the same transaction as the stock write and
            returns it. Called as ``record(stock_id, guarded)``: the row taken (None when the
            chooser took nothing) and whether to write the database backstop key.
        quantity: units to take, at least 1.
        buckets: how many buckets the item's stock is split into (``inventory.buckets``):
            with more than one, the take reads and guards one bucket's rows, the one
            ``route`` names, and falls over to the others while any has stock.
        route: which bucket to try, first and after one found empty under its guard
            (``inventory.buckets.Route``); None: the user's home bucket first, then the next
            with stock (``home_route``, a voucher's). A pool routes by weight.
        choose_empty: whether ``choose`` is asked of a bucket with no row left, to take
            nothing (a bucketed pool with a weight of no prize: each bucket carries its share
            of it); otherwise such a bucket is sold out and the take falls over.

    What a deferred strategy (``redis_lua``) reads, reserving in the request and leaving
    the record to a worker:
        kind, item_id: the item, for the worker asked to persist or rebuild it; with
            ``user_id``, the scope of the per-user rule (:attr:`user_key`).
        over_limit: raised when the user has used every take.
        reserved: the answer, given the reservation: the record as it will be, pending.
        rand: the weighted choice's uniform number in [0, 1), only to reserve (None: random).
        window_check: ``NotStarted`` or ``Ended`` unless the window read is open, heard
            before a missing state's rebuild is asked for (a closed sale has none).

    What every strategy that takes in the request checks (``abandon_refuse``; ``redis_lua``
    checks it in its script): ``abandon_limit`` abandoned holds per user (0: no cap) and
    ``abandon_cooldown`` seconds after each (0: none), at ``abandon_now``.

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
    ticket: TicketHeld | None = None
    admit: Callable[[], Mapping[int, int] | None] = lambda: None
    quantity: int = 1
    buckets: int = 1
    route: Route | None = None
    choose_empty: bool = False
    kind: str = ""
    item_id: int = 0
    over_limit: Callable[[], DomainError] | None = None
    reserved: Callable[[Reserved], R] | None = None
    rand: Callable[[], float] | None = None
    window_check: Callable[[], None] = lambda: None
    counted: Callable[[], int] | None = None
    allowed: Callable[[], int] | None = None
    abandon_limit: int = 0
    abandon_cooldown: int = 0
    abandon_now: datetime | None = None

    @property
    def user_key(self) -> str:
        """The scope of the per-user rule, which lock-based strategies lock: named as every
        change of what the take took names it (``changes.rule_scope``)."""
        return rule_scope(self.kind, self.item_id, self.user_id)


def units_out(units: int | Expression) -> dict[str, Any]:
    """The fields of a stock row's UPDATE when ``units`` leave it for records (a number, or an
    expression of the row: ``db_optimistic`` writes a bucket's rows at once): its running
    total of units taken moves with the stock, in the same statement."""
    return {"quantity": F("quantity") - units, "taken": F("taken") + units, "version": F("version") + 1}


def abandon_refuse(take: Take) -> None:
    """Refuse a user at the item's cap of abandoned holds (``AbandonLimit``) or within the
    cooldown after the last (``CoolingDown``), from the user's row of the group (docs/design.md,
    "Abandoned holds"). Checked after the record, in its transaction (a refusal rolls the take
    back), when a racing release has committed or waits for the take's stock row: a read
    before would cost every take a query to spare the rare refused one its write."""
    if not (take.abandon_limit or take.abandon_cooldown):
        return
    found = Abandoned.objects.filter(group_id=take.group_id, user_id=take.user_id).values_list("holds", "last_at")
    holds, last_at = found.first() or (0, None)
    if take.abandon_limit and holds >= take.abandon_limit:
        raise AbandonLimit()
    if take.abandon_cooldown and last_at is not None and take.abandon_now is not None:
        left = (last_at - take.abandon_now).total_seconds() + take.abandon_cooldown
        if left > 0:
            raise CoolingDown(ceil(left))


def choose_first(remaining: Mapping[int, int]) -> int:
    """The chooser of a voucher, whatever its group's rows: the first with stock, in
    primary-key order."""
    return min(remaining)


def race_window() -> None:
    """Sleep ``RACE_WINDOW_MS`` between the choice and the write."""
    if settings.RACE_WINDOW_MS > 0:
        time.sleep(settings.RACE_WINDOW_MS / 1000)


def constraint_violated(exc: IntegrityError, name: str) -> bool:
    """Whether ``exc`` was raised by the database constraint called ``name``: MySQL and
    MariaDB name the constraint (or the unique key) in the message; SQLite names the columns
    of a unique index, so callers pass a name that matches either."""
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
    # db_optimistic's bucketed take: the version of each row it read.
    row_versions: dict[int, int] = field(default_factory=dict)
    group_lock: LeasedLock | None = None
    # What the take's ``admit`` read, unguarded, before the guard.
    snapshot: Mapping[int, int] | None = None
    # The bucket whose rows the take reads and guards; None: every row of the group.
    bucket: int | None = None


def candidates(group_id: int, bucket: int | None) -> QuerySet[Stock]:
    """The rows a take chooses among: the group's, or one bucket's of them."""
    rows = Stock.objects.filter(group_id=group_id)
    return rows if bucket is None else rows.filter(bucket=bucket)


def read_remaining(group_id: int, quantity: int, bucket: int | None = None) -> dict[int, int]:
    rows = candidates(group_id, bucket).filter(quantity__gte=quantity)
    return dict(rows.order_by("id").values_list("id", "quantity"))


def guard_hold() -> None:
    """Sleep ``GUARD_HOLD_MS`` right after the stock write, inside every guard (benchmarks)."""
    if settings.GUARD_HOLD_MS > 0:
        time.sleep(settings.GUARD_HOLD_MS / 1000)


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
        if take.ticket is not None:
            take.ticket.spend(take.rate, tag=group_tag(take.group_id))  # its rate limits counted too
        elif take.rate is not None:
            take.rate.count(tag=group_tag(take.group_id))
        snapshot = take.admit()
        if take.buckets == 1:
            return self._take_from(take, None, snapshot)
        return self._take_bucketed(take)

    # How many buckets one take tries, the home one included, before it answers busy: each
    # further one was read with stock and found empty under its guard (taken meanwhile).
    FALL_OVER_TRIES = 8

    def _take_bucketed(self, take: Take[R]) -> R:
        """The bucket the take's route names (a voucher's: the home bucket); when it has
        nothing left under its guard, the one the route names next from an unguarded read of
        the buckets with stock, each under its own guard; sold out only when that read finds
        none. Each bucket is tried in a guard of its own, never two at once, so takes that
        fall over from different buckets cannot deadlock on each other's rows."""
        route = take.route or home_route(
            group_id=take.group_id, user_id=take.user_id, buckets=take.buckets, quantity=take.quantity
        )
        bucket = route(None)
        for _ in range(self.FALL_OVER_TRIES):
            try:
                return self._take_from(take, bucket, None)
            except SoldOut:
                bucket = route(bucket)
        raise LockBusy()

    def _take_from(self, take: Take[R], bucket: int | None, snapshot: Mapping[int, int] | None) -> R:
        with self.guard(take) as held:
            held.snapshot = snapshot
            held.bucket = bucket
            take.check()
            for attempt in range(self.max_attempts()):
                remaining = self.read(take, held, attempt)
                chosen = self._choose(take, remaining, empty_ok=bucket is not None and take.choose_empty)
                if attempt == 0:
                    race_window()
                with self.writing(take, held):
                    counts_over = not self.guarded and take.counted is not None
                    if counts_over:
                        lock_group(take.group_id)  # before the stock row, as every writer of both
                    if chosen is None or self.write(take, held, chosen, remaining):
                        guard_hold()
                        record = take.record(chosen, self.guarded)
                        abandon_refuse(take)
                        if counts_over:
                            over_counted(take.group_id, counted=take.counted, allowed=take.allowed, delta=1)
                        return record
                self.before_retry(attempt)
            raise LockBusy()

    @staticmethod
    def _choose(take: Take, remaining: Mapping[int, int], *, empty_ok: bool = False) -> int | None:
        available = {stock_id: left for stock_id, left in remaining.items() if left >= take.quantity}
        if not available and not empty_ok:
            raise SoldOut()
        chosen = take.choose(available)
        if chosen is not None and chosen not in available:
            raise ValueError(f"the chooser picked stock {chosen}, which was not a candidate with stock")
        return chosen


@contextmanager
def in_transaction() -> Iterator[Held]:
    with transaction.atomic():
        yield Held()
