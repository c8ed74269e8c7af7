"""The other half of a unit's life, for every strategy (docs/design.md, "Lifecycle"): a
:class:`Change` settles a held record (paid, claimed) or releases it (cancelled, expired,
forfeited: its unit back in the stock), under the guard that took it
(``StockStrategy.change``); :func:`change_write` is its write, and keeps the stock's running
totals (docs/design.md, "Running totals") in step with what the record became, and counts a
release as the user's abandoned hold (docs/design.md, "Abandoned holds"), unless it is the
lapse of a hold whose settle was asked in time (:func:`abandons`). An
:class:`Expiry` releases an item's held records past their deadline, a batch at a time
(``StockStrategy.expire``); :func:`expiry_write` is the batch's write.

:func:`units_return` is the one write of units back to a stock row, whether one record's
release or a batch's. :func:`over_counted` keeps the totals of takes past the per-user rule,
for a take or a change of an unguarded strategy, and for a release of takes past it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

from django.db import connections, router, transaction
from django.db.models import F, QuerySet

from ..models import Abandoned, Stock, StockGroup
from ..records import TAKING, Record


def rule_scope(kind: str, item_id: int, user_id: int) -> str:
    """The name of the per-user rule's scope (``"voucher:3:user:7"``), which the lock-based
    strategies lock: a take's (``Take.user_key``) and every change's of what it took
    (``Change.user_key``) are built here alone, so that both lock the same name."""
    return f"{kind}:{item_id}:user:{user_id}"


@dataclass(frozen=True)
class Change:
    """One change of one held record, as the core's holds (``inventory.holds``) say it.

    Attributes:
        records: the record's own queryset (its model filtered by its primary key).
        target: the status it changes to.
        fields: the other fields written with the status (when, whose take it frees).
        stock_id: the row its unit goes back to; None for a settle, or a record that took
            nothing.
        group_id: the take's, so that a strategy guards the change with what guarded the
            take (its transaction, the group's rows); the user's lock is named as the
            take's (:attr:`user_key`).
        item_id: the record's item.
        still_before: for a settle, the deadline must still be after it: a guarded
            strategy does not settle a hold that lapsed between its check and its write.
        kind, record_id, user_id: the record, for a strategy that keeps stock
            outside the database (``redis_lua`` returns the unit there too).
        frees_take: whether a release gives the user the take back (a voucher's buyer
            may buy again; a forfeited draw still counts).
        lapses: whether the change is the lapse of the hold at its deadline (expired,
            forfeited), not a cancel: a lapse of a record whose settle was asked in time is
            no abandoned hold (:func:`abandons`).
        unit_field: the record's lookup of the stock row it took, read by an unguarded
            write, which may change a record that is not held any more.
        counted, allowed: as a ``Take``'s, for the running totals of takes past the per-user
            rule.
        over_rule: whether the item had takes past the rule when the change was read: a
            guarded release then counts them too, since it may release one of them.
    """

    records: QuerySet
    target: str
    group_id: int
    fields: Mapping[str, Any] = field(default_factory=dict)
    stock_id: int | None = None
    still_before: datetime | None = None
    kind: str = ""
    item_id: int = 0
    record_id: int = 0
    user_id: int = 0
    frees_take: bool = False
    lapses: bool = False
    unit_field: str = ""
    counted: Callable[[], int] | None = None
    allowed: Callable[[], int] | None = None
    over_rule: bool = False

    @property
    def user_key(self) -> str:
        return rule_scope(self.kind, self.item_id, self.user_id)

    @property
    def releases(self) -> bool:
        return "released_at" in self.fields

    def counts_over(self, *, guarded: bool) -> bool:
        """Whether this change keeps the totals of takes past the per-user rule: an
        unguarded write can make them, and any release of a take may end one."""
        return self.frees_take and self.counted is not None and (not guarded or self.over_rule)


class Returned(NamedTuple):
    """A record released just now, and the row its unit went back to (None: it took none)."""

    record_id: int
    user_id: int
    stock_id: int | None


@dataclass(frozen=True)
class Expiry:
    """The release of one item's held records past their deadline, as the core's holds
    (``inventory.holds.holds_expire_due``) say it, for the item's strategy to run
    (``StockStrategy.expire``).

    Attributes:
        due: the item's records held past their deadline, in the order of the index that
            reads them.
        target: the status they lapse to (expired, forfeited).
        group_id: the item's stock group.
        batch: the most records one run releases.
        fields: the other fields written with the status (when, whose take it frees).
        unit_field: the records' column of the stock row each took.
        kind, frees_take: as a ``Change``'s.
        counted: given a user's id, the user's records of the item that count against the
            per-user rule, now.
        allowed: as a ``Change``'s.
        change_of: the release of one of them, given its id, its user's and its stock
            row's, as a ``Change``: for a strategy that releases one record at a time.
    """

    due: QuerySet
    target: str
    group_id: int
    batch: int
    change_of: Callable[[int, int, int | None], Change]
    fields: Mapping[str, Any] = field(default_factory=dict)
    unit_field: str = ""
    kind: str = ""
    frees_take: bool = False
    counted: Callable[[int], int] | None = None
    allowed: Callable[[], int] | None = None

    def over_rule(self) -> bool:
        """Whether a batch keeps the running totals of takes past the per-user rule for each
        user's releases: where a release frees the take and the item holds such takes now."""
        return self.frees_take and takes_over_rule(self.group_id)


def takes_over_rule(group_id: int) -> bool:
    """Whether the group holds takes past the per-user rule now (an unguarded strategy made
    them): a release under any strategy then keeps their running totals too."""
    return StockGroup.objects.filter(pk=group_id, over_takes__gt=0).exists()


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
    # The group's row first when the per-user totals move, as a restock and db_optimistic
    # lock it before a stock row; then the stock row, as a take writes it before its record:
    # two transactions that lock two rows in opposite orders deadlock.
    if change.counts_over(guarded=guarded):
        lock_group(change.group_id)
    if returns:
        lock_rows([change.stock_id])
    if guarded:
        was, unit = Record.Status.HELD, change.stock_id
    else:
        was, unit = _read_overwritten(change)
    if not records.update(status=change.target, **fields):
        return False
    if change.releases and abandons(lapses=change.lapses, settle_asked=_settle_asked(change)):
        # An abandoned hold, counted last: the user's row is locked after the stock row and
        # the record, as every release locks them (docs/design.md, "Abandoned holds").
        abandons_add(change.group_id, {change.user_id: 1}, change.fields["released_at"])
    # +1: the record holds its unit again; -1: it gave it back; 0: no change.
    taken = int(change.target in TAKING) - int(was in TAKING)
    if returns:
        units_return(change.stock_id, 1, taken=-taken)
    elif unit is not None and taken:
        Stock.objects.filter(pk=unit).update(taken=F("taken") + taken)
    if change.counts_over(guarded=guarded):
        over_counted(change.group_id, counted=change.counted, allowed=change.allowed, delta=taken)
    return True


def abandons(*, lapses: bool, settle_asked: bool) -> bool:
    """Whether a release is the user's abandoned hold: a cancel always, a lapse unless the
    record's settle was asked before its deadline (``Record.settle_asked_at``: a payment made
    in time whose confirmation came late, or was refunded when the deadline passed during its
    charge). The buyer paid in time; the rule is for those who let a hold go. A cancel of a
    hold being paid counts: it is the buyer's own, or paying then cancelling would pass the
    cap. The one rule every release follows, a batch's and one record's, under every
    strategy; ``redis_lua`` sets Redis' counts to the database's after each."""
    return not (lapses and settle_asked)


def _settle_asked(change: Change) -> bool:
    """Whether the record just released had its settle asked in time: read on the row the
    release has just written (its own write, so the latest), and only for a lapse."""
    return change.lapses and change.records.filter(settle_asked_at__isnull=False).exists()


def _read_overwritten(change: Change) -> tuple[str | None, int | None]:
    """The status an unguarded write is about to overwrite, and the stock row the record
    holds, read under the record's row lock so that racing writes read one another's. The
    stock row is locked before the record, as every take and release locks them."""
    unit = change.records.values_list(change.unit_field, flat=True).first() if change.unit_field else change.stock_id
    if unit is not None and unit != change.stock_id:
        lock_rows([unit])
    return change.records.select_for_update().values_list("status", flat=True).first(), unit


def expiry_write(expiry: Expiry) -> list[Returned]:
    """Release up to ``expiry.batch`` of its due records in one transaction: their rows
    locked (``SKIP LOCKED``: a record being paid this instant is left for the next run),
    changed only while still held, and their units returned with one UPDATE per stock row;
    what each returned. Where the item holds takes past the per-user rule, their running
    totals follow each user's releases."""
    over_rule = expiry.over_rule()
    model = expiry.due.model
    with transaction.atomic():
        if over_rule:
            lock_group(expiry.group_id)  # before the stock rows, as every writer of both
        # The stock rows first, then the records, as a take and a single release lock them:
        # the other order deadlocks against a purchase. Only the records' own rows are
        # locked (a join's would be too: MariaDB has no ``OF``).
        candidates = list(expiry.due.values_list("pk", flat=True)[: expiry.batch])
        if not candidates:
            return []
        units_of = model.objects.filter(pk__in=candidates).values_list(expiry.unit_field, flat=True)
        lock_rows(sorted({stock_id for stock_id in units_of if stock_id is not None}))
        due = expiry.due.filter(pk__in=candidates).select_for_update(skip_locked=True)
        # Read locked: whether a settle was asked of each (a pay committed after the read
        # of the candidates is seen).
        asked = dict(due.values_list("pk", "settle_asked_at"))
        ids = list(asked)
        if not ids:
            return []
        records = model.objects.filter(pk__in=ids)
        rows = [Returned(*row) for row in records.values_list("pk", "user_id", expiry.unit_field)]
        fields = {"status": expiry.target, "releases": F("releases") + 1, **expiry.fields}
        records.filter(status=Record.Status.HELD).update(**fields)
        units = Counter(row.stock_id for row in rows if row.stock_id is not None)
        for stock_id, count in sorted(units.items()):
            units_return(stock_id, count)
        abandoned = Counter(
            row.user_id for row in rows if abandons(lapses=True, settle_asked=asked[row.record_id] is not None)
        )
        abandons_add(expiry.group_id, abandoned, expiry.fields["released_at"])
        if over_rule:
            for user_id, count in Counter(row.user_id for row in rows).items():
                over_counted(
                    expiry.group_id,
                    counted=partial(expiry.counted, user_id),
                    allowed=expiry.allowed,
                    delta=-count,
                )
    return rows


def units_return(stock_id: int, units: int, *, taken: int | None = None) -> None:
    """Return ``units`` to a stock row from records that held ``taken`` of them (all, unless
    an unguarded write returns one twice), in the caller's transaction: the one write of a
    unit's return, one record's release or a batch's. The row's running total of units
    taken moves with its stock, in the same statement, as a take's (``units_out``)."""
    taken = units if taken is None else taken
    Stock.objects.filter(pk=stock_id).update(
        quantity=F("quantity") + units, taken=F("taken") - taken, version=F("version") + 1
    )


def over_counted(group_id: int, *, counted: Callable[[], int], allowed: Callable[[], int], delta: int) -> None:
    """Keep the group's running totals of takes beyond the per-user rule, after a write
    moved the user's count of records that count against it (``counted()``, now) by
    ``delta``. The group's row is locked before the count (the caller locked it first, in
    the order every writer locks it), so the writes of one item count in turn, each seeing
    those committed before it; the rule's limit is read under the same lock, as a change of
    the limit recounts under it (``inventory.totals.over_recount``)."""
    if delta == 0:
        return
    lock_group(group_id)
    now, limit = counted(), allowed()
    before = now - delta
    takes = max(0, now - limit) - max(0, before - limit)
    takers = int(now > limit) - int(before > limit)
    if takes or takers:
        StockGroup.objects.filter(pk=group_id).update(
            over_takes=F("over_takes") + takes, over_takers=F("over_takers") + takers
        )


def lock_group(group_id: int) -> None:
    """Lock a stock group's row for the caller's transaction: before its stock rows, as a
    restock and db_optimistic lock it."""
    list(StockGroup.objects.select_for_update().filter(pk=group_id).values_list("pk", flat=True))


def lock_rows(stock_ids: list[int]) -> None:
    """Lock stock rows in primary-key order for the caller's transaction (a no-op outside
    one, and on SQLite, whose transactions hold its one write lock)."""
    list(Stock.objects.select_for_update().filter(pk__in=stock_ids).order_by("pk").values_list("pk", flat=True))


def abandons_add(group_id: int, users: Mapping[int, int], at: datetime) -> None:
    """Count ``users[u]`` more abandoned holds of the group's item for each user ``u``, the last
    released ``at``, in the caller's transaction, in one statement: an INSERT that adds to the
    user's row where there is one (its unique key, the group and the user), so that releases
    of one user racing each other count each; the rows in the key's order, as every release
    locks them."""
    if not users:
        return
    connection = connections[router.db_for_write(Abandoned)]
    table = connection.ops.quote_name(Abandoned._meta.db_table)
    when = connection.ops.adapt_datetimefield_value(at)
    rows = sorted(users.items())
    params = [value for user_id, holds in rows for value in (group_id, user_id, holds, when)]
    if connection.vendor == "mysql":
        add = "ON DUPLICATE KEY UPDATE holds = holds + VALUES(holds), last_at = VALUES(last_at)"
    else:  # SQLite (``make run``)
        add = "ON CONFLICT (group_id, user_id) DO UPDATE SET holds = holds + excluded.holds, last_at = excluded.last_at"
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (group_id, user_id, holds, last_at) VALUES {values} {add}", params)
