"""Writes to stock outside a take: creating rows and restocking. Takes live in ``inventory.strategies``."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F

from .errors import InvalidQuantity, SupplyLimit
from .models import Stock, StockGroup
from .totals import group_rows

MAX_UNITS = 100_000_000


def _validate_units(quantity: object, *, name: str, minimum: int) -> int:
    if isinstance(quantity, bool) or not isinstance(quantity, int) or not minimum <= quantity <= MAX_UNITS:
        least = "zero or more" if minimum == 0 else "at least 1"
        raise InvalidQuantity(f"{name} must be a whole number, {least}, and at most {MAX_UNITS:,}.")
    return quantity


def stock_group_create() -> StockGroup:
    """An empty group: a product adds its rows with :func:`stock_create`."""
    return StockGroup.objects.create()


def stock_create(*, group: StockGroup, quantity: int) -> Stock:
    """A new row of ``quantity`` units in ``group``.

    It bumps the group's version, as every write that changes what a take would
    choose among must: ``db_optimistic`` compares it.
    """
    quantity = _validate_units(quantity, name="stock", minimum=0)
    with transaction.atomic():
        StockGroup.objects.filter(pk=group.pk).update(version=F("version") + 1)
        return Stock.objects.create(group=group, quantity=quantity, initial_quantity=quantity)


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


def stock_group_restock(*, group_id: int, quantity: int) -> int:
    """Add ``quantity`` units to a group whose rows are sold as one (a voucher's): to its
    first row in primary-key order, the row its takes choose first. The row restocked, as
    :func:`stock_restock` restocks it."""
    stock_id = group_rows(group_id=group_id)[0]
    stock_restock(stock_id=stock_id, quantity=quantity)
    return stock_id
