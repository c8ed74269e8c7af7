"""A take under ``redis_lua``, whatever the product (``inventory.product``): the reserve call,
with the workers it asks to persist or rebuild, and the fallback when the item's state is
missing because the item has switched to another strategy since it was read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from django.db.models import Model

from core.ratelimit import RateCount

from .errors import SoldOut
from .items import item_forget
from .models import Strategy
from .product import Product
from .reservation_types import group_tag
from .reserve import StateMissing, stock_reserve
from .tasks import reservations_drain, reservations_rebuild


class Attempt(NamedTuple):
    """What :func:`item_reserve` did: ``record``, the pending record of a reservation, or None
    when the take is the strategy's to make, on ``item`` (read again after a switch)."""

    record: Model | None
    item: Any


def item_reserve(
    product: Product,
    item: Any,
    *,
    user_id: int,
    rate: RateCount | None,
    rand: Callable[[], float] | None = None,
) -> Attempt:
    """Under ``redis_lua`` reserve one unit of ``item`` for ``user_id`` (``stock_reserve``): one
    script call, the record written later by a worker, the answer the record as it will be,
    pending, unsaved. The window, the limit and the stock are the script's to check, against
    Redis: nothing here reads the database.

    Raises ``product.over_limit`` and ``product.sold_out`` as the script refuses, and
    ``StateMissing`` (503) while the item's Redis state is missing. When it is missing because
    the item was switched away since it was read, the item is forgotten and read again, and
    the take is its new strategy's: ``Attempt(None, item)``, as for any item not under
    ``redis_lua``. ``rate`` (the request's rate limits) is counted on the item's group either
    way: by the script, or here. ``rand``, called only for a reservation, makes the weighted
    choice's number (a system random one by default).
    """
    if item.strategy == Strategy.REDIS_LUA:
        try:
            return Attempt(_reserve(product, item, user_id=user_id, rate=rate, rand=rand), item)
        except StateMissing:
            # Switched away since this item was read (or Redis lost the state).
            item_forget(product, item_id=item.pk)
            item = product.read(item.pk)
            if item.strategy == Strategy.REDIS_LUA:
                raise
            return Attempt(None, item)  # the rate counted by the script already
    if rate is not None:
        rate.count(tag=group_tag(product.group_of(item)))
    return Attempt(None, item)


def _reserve(
    product: Product, item: Any, *, user_id: int, rate: RateCount | None, rand: Callable[[], float] | None
) -> Model:
    group_id = product.group_of(item)
    try:
        reserved = stock_reserve(
            group_id=group_id,
            user_id=user_id,
            over_limit=product.over_limit,
            persist_soon=lambda: reservations_drain.delay(product.kind, item.pk, group_id),
            rebuild_soon=lambda: reservations_rebuild.delay(product.kind, item.pk),
            rand=None if rand is None else rand(),
            rate=rate,
        )
    except SoldOut as exc:
        if product.sold_out is SoldOut:
            raise
        raise product.sold_out() from exc
    return product.reserved(item, user_id, reserved)
