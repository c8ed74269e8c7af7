"""Running totals of an item's takes (docs/design.md, "Running totals"): what the shop's
pages show and flag, kept in step with the takes instead of counted from the records.

Two totals, each written in the transaction of the write that changes it:

- ``Stock.taken``: the units of a stock row that records hold (held, or settled). Every
  take writes it in the same UPDATE as the row's ``quantity`` (``units_out``), every return
  of a unit that a record held gives it back (``units_return``): the pages read "sold" and
  "stock + taken == supply" from the row, whatever the strategy, ``none`` included (its
  absolute write of ``quantity`` loses updates; its relative ``taken`` does not).
- ``StockGroup.over_takes`` and ``over_takers``: the takes users hold beyond the per-user
  rule (a second order of a voucher, draws past the limit), and the users who hold any.
  Only an unguarded strategy writes past the rule, so only its writes count them
  (``over_counted``), under the group's row lock.

A page then costs one small read whatever the site's history. The audits still count the
records, as an independent check, and say whether these totals agree with them.

An item's stock is the rows of its group, one per bucket of a voucher, one per prize and
bucket of a pool, and is read in one way: summed over the group's rows with the item
(:func:`stock_sums`), or for a group alone (:func:`group_marks`); a pool's prize likewise,
summed over the rows that share its units (``Stock.head``). Only the audits read the rows
apart.

:func:`totals_recount` sets the totals from the records: for data written around the
takes (a bulk import, a database built for a benchmark), or a repair. A change of the draw
limit recounts the users past it (:func:`over_recount`): who is over a limit depends on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count, IntegerField, Model
from django.db.models.expressions import RawSQL

from .models import Stock, StockGroup
from .product import Product
from .records import TAKING
from .strategies.changes import lock_group, lock_rows


@dataclass(frozen=True)
class StockMarks:
    """What one stock row's totals say: units beyond its supply, and whether stock and the
    units taken add up to the supply (a lost update makes them not)."""

    supplied: int
    stock: int
    taken: int

    @classmethod
    def of(cls, stock: Stock) -> StockMarks:
        return cls(supplied=stock.initial_quantity, stock=stock.quantity, taken=stock.taken)

    @classmethod
    def summed(cls, read: Any) -> StockMarks:
        """From what was read with :func:`stock_sums` (an item, a prize): its rows as one."""
        return cls(supplied=read.stock_supplied, stock=read.stock_left, taken=read.stock_taken)

    @property
    def over(self) -> int:
        return max(0, self.taken - self.supplied)

    @property
    def conserved(self) -> bool:
        return self.stock + self.taken == self.supplied


@dataclass(frozen=True)
class ItemMarks:
    """What an item's totals say, for its pages: its rows' marks summed, and the takes and
    users beyond the per-user rule."""

    rows: tuple[StockMarks, ...]
    over_takes: int
    over_takers: int

    @classmethod
    def of(cls, stocks: Iterable[Stock], group: StockGroup) -> ItemMarks:
        return cls(
            rows=tuple(StockMarks.of(stock) for stock in stocks),
            over_takes=group.over_takes,
            over_takers=group.over_takers,
        )

    @classmethod
    def summed(cls, item: Any, group: StockGroup) -> ItemMarks:
        """From an item read with :func:`stock_sums`: its group's rows as one."""
        return cls(rows=(StockMarks.summed(item),), over_takes=group.over_takes, over_takers=group.over_takers)

    @property
    def supplied(self) -> int:
        return sum(row.supplied for row in self.rows)

    @property
    def stock(self) -> int:
        return sum(row.stock for row in self.rows)

    @property
    def taken(self) -> int:
        return sum(row.taken for row in self.rows)

    @property
    def over(self) -> int:
        return sum(row.over for row in self.rows)

    @property
    def conserved(self) -> bool:
        return all(row.conserved for row in self.rows)

    @property
    def stock_not_negative(self) -> bool:
        return all(row.stock >= 0 for row in self.rows)

    @property
    def ok(self) -> bool:
        return self.over == 0 and self.over_takes == 0 and self.conserved and self.stock_not_negative


# The figures of a stock group's rows that an item is read with, summed: the name each is
# read under, and its column.
STOCK_SUMS = {"stock_left": "quantity", "stock_supplied": "initial_quantity", "stock_taken": "taken"}


def stock_sums(model: type[Model], *names: str, group: str = "group_id", key: str = "group_id") -> dict[str, RawSQL]:
    """The one read of an item's stock: the annotations that read, with each row of ``model``
    (an item, whose column ``group`` is its stock group), its group's stock rows summed:
    ``stock_left`` (units left), ``stock_supplied`` (the initial stock and every restock) and
    ``stock_taken`` (units that records hold); those of ``names`` alone when given.

    A correlated sum per figure over the group's rows (indexed by group), written as SQL:
    Django spends more time compiling the ORM's aggregate than the database spends answering
    it, and every take of a flash crowd reads one. Made once per model, a module's constant
    (``items.annotate(**SUMS)``), so that a take's read calls nothing here.

    With ``key="head_id"`` and ``group`` the column naming a head row (a prize's
    ``stock_id``), the rows summed are those that share that head's units (``Stock.head``):
    a prize's stock over its buckets, read as an item's is."""
    outer = f"{model._meta.db_table}.{group}"
    return {
        # Read as a whole number (MariaDB sums into a decimal).
        name: RawSQL(
            f"SELECT COALESCE(SUM(s.{column}), 0) FROM {Stock._meta.db_table} s WHERE s.{key} = {outer}",
            (),
            output_field=IntegerField(),
        )
        for name, column in STOCK_SUMS.items()
        if not names or name in names
    }


def stock_only_row(model: type[Model], *, group: str = "group_id") -> dict[str, RawSQL]:
    """The annotation ``stock_only_row``, read with each row of ``model`` as :func:`stock_sums`
    reads: the id of its group's stock row when the group has one row, NULL when it has
    several. With ``stock_left`` it is the snapshot of the rows that a take's ``admit`` hands
    the strategies whose own first read is unguarded, sparing them that read."""
    outer = f"{model._meta.db_table}.{group}"
    return {
        "stock_only_row": RawSQL(
            f"SELECT CASE WHEN COUNT(*) = 1 THEN MIN(s.id) END FROM {Stock._meta.db_table} s"
            f" WHERE s.group_id = {outer}",
            (),
            output_field=IntegerField(),
        )
    }


_GROUP_SUMS = stock_sums(StockGroup, group="id")


def group_marks(*, group_id: int) -> ItemMarks:
    """What a stock group's totals say, its rows summed, in one read: for what holds an item's
    group rather than the item read with its stock (a command, a load run, a benchmark)."""
    group = StockGroup.objects.annotate(**_GROUP_SUMS).get(pk=group_id)
    return ItemMarks.summed(group, group)


def group_rows(*, group_id: int, buckets: int | None = None) -> list[int]:
    """The ids of a stock group's rows in primary-key order, the order a voucher's takes
    choose among them (the first with stock), of its first ``buckets`` buckets when given:
    for what writes records around the takes (a big site, a benchmark) and a restock."""
    rows = Stock.objects.filter(group_id=group_id)
    if buckets is not None:
        rows = rows.filter(bucket__lt=buckets)
    return list(rows.order_by("pk").values_list("pk", flat=True))


def totals_counted(product: Product, item: Any) -> tuple[dict[int, int], int, int]:
    """The totals as the records say they should be: ``{stock id: units taken}`` of the
    item's rows, and the takes and users beyond the per-user rule."""
    records = product.records(item.pk)
    taken = dict(
        records.filter(status__in=TAKING, **{f"{product.unit_field}__isnull": False})
        .order_by()
        .values(product.unit_field)
        .annotate(n=Count("id"))
        .values_list(product.unit_field, "n")
    )
    allowed = product.rules(item).limit
    over = list(
        product.taking(records)
        .order_by()
        .values("user_id")
        .annotate(n=Count("id"))
        .filter(n__gt=allowed)
        .values_list("n", flat=True)
    )
    return taken, sum(n - allowed for n in over), len(over)


@transaction.atomic
def totals_recount(product: Product, *, item_ids: Iterable[int] | None = None) -> int:
    """Set the running totals of the product's items (of ``item_ids``, or every one) from
    their records; the number of items whose totals changed.

    Each item's group and stock rows are locked first, in the order every writer locks
    them, so that a write in flight is counted once it commits, never half."""
    items = product.items()
    if item_ids is not None:
        items = items.filter(pk__in=list(item_ids))
    changed = 0
    for item in items.order_by("pk"):
        group_id = product.group_of(item)
        lock_group(group_id)
        before = dict(Stock.objects.filter(group_id=group_id).order_by("pk").values_list("pk", "taken"))
        lock_rows(list(before))
        taken, over_takes, over_takers = totals_counted(product, item)
        moved = [stock_id for stock_id, n in before.items() if n != taken.get(stock_id, 0)]
        for stock_id in moved:  # an item's few rows
            Stock.objects.filter(pk=stock_id).update(taken=taken.get(stock_id, 0))
        group_changed = (
            StockGroup.objects.filter(pk=group_id)
            .exclude(over_takes=over_takes, over_takers=over_takers)
            .update(over_takes=over_takes, over_takers=over_takers)
        )
        changed += bool(moved or group_changed)
    return changed


def over_recount(product: Product, item: Any) -> None:
    """Set the item's totals of takes beyond the per-user rule from its records, in the
    caller's transaction: after a change of the rule itself (the draw limit)."""
    lock_group(product.group_of(item))
    _, over_takes, over_takers = totals_counted(product, item)
    StockGroup.objects.filter(pk=product.group_of(item)).update(over_takes=over_takes, over_takers=over_takers)
