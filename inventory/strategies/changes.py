"""The other half of a unit's life, for every strategy (docs/design.md, "Lifecycle"): a
:class:`Change` settles a held record (paid, claimed) or releases it (cancelled, expired,
forfeited: its unit back in the stock), under the guard that took it
(``StockStrategy.change``); :func:`change_write` is its write, and keeps the stock's running
totals (docs/design.md, "Running totals") in step with what the record became.
:func:`over_counted` keeps the totals of takes past the per-user rule, for a take or a
change of an unguarded strategy."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from django.db.models import F, QuerySet

from ..models import Stock, StockGroup
from ..records import TAKING, Record

if TYPE_CHECKING:
    pass


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
        counted, allowed: as a ``Take``'s, for the running totals of takes past the per-user
            rule.
        over_rule: whether the item had takes past the rule when the change was read: a
            guarded release then counts them too, since it may release one of them.
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
    allowed: Callable[[], int] | None = None
    over_rule: bool = False

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
    # +1: the record holds its unit again; -1: it gave it back; 0: no change.
    taken = int(change.target in TAKING) - int(was in TAKING)
    if returns:
        Stock.objects.filter(pk=change.stock_id).update(**units_back(1, taken=-taken))
    elif unit is not None and taken:
        Stock.objects.filter(pk=unit).update(taken=F("taken") + taken)
    if change.counts_over(guarded=guarded):
        over_counted(change.group_id, counted=change.counted, allowed=change.allowed, delta=taken)
    return True


def _read_overwritten(change: Change) -> tuple[str | None, int | None]:
    """The status an unguarded write is about to overwrite, and the stock row the record
    holds, read under the record's row lock so that racing writes read one another's. The
    stock row is locked before the record, as every take and release locks them."""
    unit = change.records.values_list(change.unit_field, flat=True).first() if change.unit_field else change.stock_id
    if unit is not None and unit != change.stock_id:
        lock_rows([unit])
    return change.records.select_for_update().values_list("status", flat=True).first(), unit


def units_back(units: int, *, taken: int | None = None) -> dict[str, Any]:
    """The fields of a stock row's UPDATE when ``units`` come back to it from records that
    held ``taken`` of them (all, unless an unguarded write returns one twice)."""
    taken = units if taken is None else taken
    return {"quantity": F("quantity") + units, "taken": F("taken") - taken, "version": F("version") + 1}


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
