"""The one entry point of a take, for every product and every strategy: a purchase, a draw.

The product's adapter says what the take is (``Product.take``: its rows, its per-user rule,
its record); the item's strategy takes it (``inventory.strategies``), in the request and
answered with the record written, or deferred (``redis_lua``) and answered with the record
as it will be, pending. What both products' takes share is here, once: the refusals named
in the product's own words, and the item read again when its Redis state is missing
because it switched strategy since it was read.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from random import Random
from typing import Any

from django.db import IntegrityError
from django.db.models import Model

from core.ratelimit import RateCount

from .errors import SoldOut, StateMissing
from .items import item_forget
from .product import Product
from .strategies import STRATEGIES
from .strategies.base import constraint_violated


def item_take(
    product: Product,
    item: Any,
    *,
    user_id: int,
    rate: RateCount | None = None,
    now: datetime | None = None,
    rng: Random | None = None,
) -> Model:
    """One take of ``item`` by ``user_id`` under the item's strategy: the record.

    Raises the window's ``NotStarted``/``Ended``, ``product.over_limit`` when the user has
    used every take, ``product.sold_out`` when nothing is left, ``LockBusy`` when the
    strategy gave up under contention, ``RateLimited`` over a rate limit, and
    ``StateMissing`` (503) while a ``redis_lua`` item's Redis state is missing. On any
    error nothing is written or reserved.

    ``now`` is the clock of the window's check in the request (Redis' own for a deferred
    take); ``rng`` the source of a choice's randomness (a system random one when None): a
    seeded ``random.Random`` makes a test's choices known.
    """
    try:
        return _take(product, item, user_id=user_id, rate=rate, now=now, rng=rng)
    except StateMissing:
        # Switched away from redis_lua since this item was read (or Redis lost the state).
        item_forget(product, item_id=item.pk)
        item = product.read(item.pk)
        if STRATEGIES[item.strategy].deferred:
            raise
        # The script counted the request's rate already.
        return _take(product, item, user_id=user_id, rate=None, now=now, rng=rng)


def _take(product: Product, item: Any, *, user_id: int, rate, now, rng) -> Model:
    take = product.take(
        item,
        user_id=user_id,
        now=now,
        rng=rng,
        rate=rate,
        # Called only to reserve: a seeded draw under another strategy uses up no number.
        rand=None if rng is None else lambda: rng.random(),
        kind=product.kind,
        item_id=item.pk,
        over_limit=product.over_limit,
        reserved=partial(product.reserved, item, user_id),
    )
    try:
        return STRATEGIES[item.strategy].take(take)
    except SoldOut as exc:
        if product.sold_out is SoldOut:
            raise
        raise product.sold_out() from exc
    except IntegrityError as exc:
        # The record's backstop refused a second take past the per-user rule.
        if any(constraint_violated(exc, name) for name in product.backstop):
            raise product.over_limit() from exc
        raise
