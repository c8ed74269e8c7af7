"""Writes to stock outside a take: creating rows and restocking. Takes live in ``inventory.strategies``."""

from __future__ import annotations

from django.db import OperationalError, transaction
from django.db.models import F

from .buckets import buckets_valid, units_spread
from .errors import InvalidQuantity, RowsLocked, SupplyLimit
from .models import Stock, StockGroup
from .totals import group_rows

MAX_UNITS = 100_000_000
# MariaDB's and MySQL's answers to a row locked by another transaction under NOWAIT.
_ROW_LOCKED = {1205, 3572}


def _validate_units(quantity: object, *, name: str, minimum: int) -> int:
    if isinstance(quantity, bool) or not isinstance(quantity, int) or not minimum <= quantity <= MAX_UNITS:
        least = "zero or more" if minimum == 0 else "at least 1"
        raise InvalidQuantity(f"{name} must be a whole number, {least}, and at most {MAX_UNITS:,}.")
    return quantity


def stock_group_create() -> StockGroup:
    """An empty group: a product adds its rows with :func:`stock_create`."""
    return StockGroup.objects.create()


def stock_create(*, group: StockGroup, quantity: int, bucket: int = 0) -> Stock:
    """A new row of ``quantity`` units in ``group``, in its ``bucket``.

    It bumps the group's version, as every write that changes what a take would
    choose among must: ``db_optimistic`` compares it.
    """
    quantity = _validate_units(quantity, name="stock", minimum=0)
    with transaction.atomic():
        StockGroup.objects.filter(pk=group.pk).update(version=F("version") + 1)
        return Stock.objects.create(group=group, bucket=bucket, quantity=quantity, initial_quantity=quantity)


def stock_restock(*, stock_id: int, quantity: int) -> None:
    """Add ``quantity`` units, as one relative update that composes with any buyer.

    Refused (``SupplyLimit``, nothing written) when the row's units supplied would pass
    ``MAX_UNITS``. Never an absolute overwrite: a restock written as ``quantity = N`` would race
    the buyers decrementing the same row. The row's UPDATE waits for
    ``db_pessimistic``'s row locks, and the group's version is bumped so that a
    ``db_optimistic`` take that read before the restock chooses again.
    """
    quantity = _validate_units(quantity, name="restock", minimum=1)
    with transaction.atomic():
        group_id = Stock.objects.values_list("group_id", flat=True).get(pk=stock_id)
        StockGroup.objects.filter(pk=group_id).update(version=F("version") + 1)
        # Guarded in the same UPDATE: a row never holds more than MAX_UNITS supplied, as
        # when it was created, so its integer columns cannot overflow (a 500).
        restocked = Stock.objects.filter(pk=stock_id, initial_quantity__lte=MAX_UNITS - quantity).update(
            quantity=F("quantity") + quantity,
            initial_quantity=F("initial_quantity") + quantity,
            version=F("version") + 1,
        )
        if not restocked:
            raise SupplyLimit(f"A row is supplied at most {MAX_UNITS:,} units in all; this restock would pass that.")


def stock_group_create_spread(*, units: int, buckets: int) -> StockGroup:
    """A group whose rows are sold as one (a voucher's): one row per bucket, ``units``
    spread over them (``inventory.buckets.units_spread``)."""
    _validate_units(units, name="stock", minimum=0)
    group = stock_group_create()
    for bucket, share in enumerate(units_spread(units, buckets_valid(buckets))):
        stock_create(group=group, quantity=share, bucket=bucket)
    return group


def stock_group_restock(*, group_id: int, quantity: int, buckets: int) -> dict[int, int]:
    """Add ``quantity`` units to a group whose rows are sold as one (a voucher's), spread
    over the rows of its ``buckets`` in primary-key order (one per bucket; the first ones get
    the rest), each as :func:`stock_restock` restocks it; all or nothing. The units added
    per row."""
    return _restock_spread(group_rows(group_id=group_id, buckets=buckets), quantity)


def stock_shares_create(*, group: StockGroup, units: int, buckets: int) -> Stock:
    """The rows of one thing taken by weight among others in ``group`` (a pool's prize): one
    per bucket, ``units`` spread over them (``inventory.buckets.units_spread``), each naming
    the bucket-0 row as its head (``Stock.head``), that row itself included. The head row,
    which the thing names."""
    _validate_units(units, name="stock", minimum=0)
    shares = units_spread(units, buckets_valid(buckets))
    with transaction.atomic():
        head = stock_create(group=group, quantity=shares[0])
        Stock.objects.filter(pk=head.pk).update(head=head)
        for bucket, share in enumerate(shares[1:], start=1):
            row = stock_create(group=group, quantity=share, bucket=bucket)
            Stock.objects.filter(pk=row.pk).update(head=head)
    head.head_id = head.pk
    return head


def stock_shares(*, head_id: int) -> dict[int, int]:
    """``{stock id: quantity}`` of the rows that share ``head_id``'s units, in primary-key order."""
    return dict(Stock.objects.filter(head_id=head_id).order_by("pk").values_list("pk", "quantity"))


def stock_shares_restock(*, head_id: int, quantity: int, buckets: int | None = None) -> dict[int, int]:
    """Add ``quantity`` units to the rows that share ``head_id``'s units (a prize's), of its
    first ``buckets`` buckets when given (a row beyond a count made smaller is left empty:
    :func:`stock_group_rebucket`), spread over them in primary-key order as a voucher's
    restock is; all or nothing. The units added per row."""
    rows = Stock.objects.filter(head_id=head_id)
    if buckets is not None:
        rows = rows.filter(bucket__lt=buckets)
    return _restock_spread(list(rows.order_by("pk").values_list("pk", flat=True)), quantity)


def _restock_spread(rows: list[int], quantity: int) -> dict[int, int]:
    """``quantity`` over ``rows`` (ids in primary-key order), each share restocked as
    :func:`stock_restock` restocks a row, in one transaction: all or nothing."""
    _validate_units(quantity, name="restock", minimum=1)
    shares = units_spread(quantity, len(rows))
    added = {stock_id: share for stock_id, share in zip(rows, shares, strict=True) if share}
    with transaction.atomic():
        for stock_id, share in added.items():
            stock_restock(stock_id=stock_id, quantity=share)
    return added


def stock_group_rebucket(*, group_id: int, buckets: int) -> dict[int, int]:
    """Spread the units left of each thing in a group over ``buckets`` rows, one per bucket:
    a voucher's group is one thing (its rows name no head), a pool's a thing per prize (its
    rows share the prize's head row, ``Stock.head``). Rows are added for new buckets (naming
    the thing's head), and a bucket beyond the new count keeps its row (records point at it,
    and a released unit goes back to it) but no units. Each thing keeps its units: none moves
    from one prize to another. The change per row, added or (negative) taken.

    Every row is locked first, in primary-key order, so that no take writes a row between the
    read and the move: ``db_pessimistic``'s, ``db_atomic``'s and the lock strategies' UPDATEs
    wait for it, and ``db_optimistic``'s compare-and-set misses the bumped versions and reads
    again. The lock does not wait (``NOWAIT``): a take whose conditional UPDATE found a row
    empty keeps that row locked while it writes another of its bucket (a pool's draw chooses
    again among its prizes, in the same transaction), in no set order, so a move waiting for
    rows would deadlock with it. A row held raises ``RowsLocked``, and the whole change is
    rolled back and made again (``inventory.item_fields.item_changes_save``). A take that read
    the old count routes by it, finds its bucket empty, and falls over to one with stock.
    Units move with their supply (``initial_quantity``), so that each row's stock and taken
    still add up to it.
    """
    buckets = buckets_valid(buckets)
    with transaction.atomic():
        StockGroup.objects.filter(pk=group_id).update(version=F("version") + 1)
        try:
            rows = list(Stock.objects.select_for_update(nowait=True).filter(group_id=group_id).order_by("id"))
        except OperationalError as exc:
            if exc.args and exc.args[0] in _ROW_LOCKED:
                raise RowsLocked() from exc
            raise
        things: dict[int | None, list[Stock]] = {}
        for row in rows:
            things.setdefault(row.head_id, []).append(row)
        moved: dict[int, int] = {}
        for head_id, shares in things.items():
            moved |= _shares_spread(group_id, head_id, shares, buckets)
    return moved


def _shares_spread(group_id: int, head_id: int | None, rows: list[Stock], buckets: int) -> dict[int, int]:
    """One thing's units left over ``buckets`` rows (its rows locked by the caller): the
    change per row."""
    have = {row.bucket for row in rows}
    rows = rows + [
        Stock.objects.create(group_id=group_id, head_id=head_id, bucket=bucket, quantity=0, initial_quantity=0)
        for bucket in range(buckets)
        if bucket not in have
    ]
    targets = units_spread(sum(row.quantity for row in rows), buckets)
    changes = {row.pk: (targets[row.bucket] if row.bucket < buckets else 0) - row.quantity for row in rows}
    # Fewer rows gather the supply: none may pass the bound a restock keeps (its integer columns
    # overflowed past it, a 500, and short of that the item could never be restocked again).
    if any(row.initial_quantity + changes[row.pk] > MAX_UNITS for row in rows):
        raise SupplyLimit(
            f"A row is supplied at most {MAX_UNITS:,} units in all; split into {buckets} buckets, one would pass that."
        )
    moved: dict[int, int] = {}
    for row in sorted(rows, key=lambda row: row.pk):
        change = changes[row.pk]
        if change:
            moved[row.pk] = change
            Stock.objects.filter(pk=row.pk).update(
                quantity=F("quantity") + change,
                initial_quantity=F("initial_quantity") + change,
                version=F("version") + 1,
            )
    return moved
