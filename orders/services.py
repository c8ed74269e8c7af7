"""Vouchers and the purchase: window, one order per user, and stock through the voucher's strategy."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Unpack

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from core.names import name_clean
from core.ratelimit import RateCount
from inventory.buckets import buckets_valid
from inventory.holds import hold_release
from inventory.item_fields import item_changes_clean, item_changes_save, item_create, item_fields_clean
from inventory.services import stock_group_create_spread, stock_group_rebucket, stock_group_restock
from inventory.take import item_take

from .models import Order, Voucher
from .product import VOUCHER

if TYPE_CHECKING:
    from inventory.item_fields import ItemChanges, ItemFields


@transaction.atomic
def voucher_create(*, title: str, stock: int, **fields: Unpack[ItemFields]) -> Voucher:
    """A voucher with ``stock`` units in a stock group of its own: one row, or one per bucket
    with the units spread over them (``buckets``, ``inventory.buckets``); and the fields
    every item has (``inventory.item_fields``); ``listed=False`` keeps it out of the shop's
    lists (a load test's own). Read it with ``orders.selectors.voucher_get`` to see its stock."""
    title = name_clean(title, field="title")
    checked = item_fields_clean(**fields)
    group = stock_group_create_spread(units=stock, buckets=checked["buckets"])
    return item_create(VOUCHER, title=title, group=group, **checked)


def voucher_update(
    *,
    voucher: Voucher,
    restock: int | None = None,
    buckets: int | None = None,
    **changes: Unpack[ItemChanges],
) -> Voucher:
    """Add stock to a voucher's group, split its stock into another number of ``buckets``
    (the units left spread again: ``inventory.services.stock_group_rebucket``), and/or change
    the fields every item has (its window, strategy or description: ``inventory.item_fields``);
    all or nothing, with its ``redis_lua`` state in step. The voucher is given back changed;
    read it again (``voucher_get``) to see its stock."""
    checked = item_changes_clean(voucher, **changes)
    rebucket = buckets is not None and buckets_valid(buckets) != voucher.buckets
    if rebucket:
        checked["buckets"] = buckets

    def stock_changed() -> dict[int, int]:
        moved = stock_group_rebucket(group_id=voucher.group_id, buckets=buckets) if rebucket else {}
        if restock is None:
            return moved
        added = stock_group_restock(group_id=voucher.group_id, quantity=restock, buckets=voucher.buckets)
        return {row: moved.get(row, 0) + added.get(row, 0) for row in moved.keys() | added.keys()}

    then = stock_changed if rebucket or restock is not None else None
    item_changes_save(VOUCHER, voucher, checked, then=then, rows_moved=rebucket)
    return voucher


def order_purchase(
    *, user: AbstractBaseUser, voucher: Voucher, now: datetime | None = None, rate: RateCount | None = None
) -> Order:
    """Buy one unit of ``voucher`` for ``user``: the order, written (confirmed), or under
    ``redis_lua`` reserved and written later by a worker (pending). What a purchase is, the
    voucher's adapter says (``orders.product``); the voucher's strategy takes it
    (``inventory.take``).

    Raises ``NotStarted``/``Ended`` outside the sale window, ``AlreadyPurchased``
    when the user has an order for it, ``SoldOut`` when stock is gone,
    ``LockBusy`` when the strategy gave up under contention, and ``StateMissing`` (503)
    while a ``redis_lua`` voucher's Redis state is missing. On any error nothing is
    written.

    ``rate``, the request's rate limits (``core.ratelimit.rate_count``), is counted on
    this voucher first, in the reserving script's own round trip under ``redis_lua``:
    ``RateLimited`` (429) when over one.

    An unlisted voucher (a load run's own) is sold only to the load crowd: ``NotForSale``
    for staff, ``Http404`` (as for an id of nothing) for anyone else.
    """
    return item_take(VOUCHER, voucher, user_id=user.pk, rate=rate, now=now)


def order_cancel(*, order: Order, now: datetime | None = None) -> Order:
    """Cancel a held order before its ``pay_by`` (the caller's own, as ``order_get`` read it:
    not read again): its unit goes back on sale once, and the buyer may buy again.
    ``HoldClosed`` (409) in the words of its state when it is not held: ``expired``,
    ``cancelled``, ``already_paid``, ``pending``."""
    return hold_release(VOUCHER, order, target=Order.Status.CANCELLED, now=now)
