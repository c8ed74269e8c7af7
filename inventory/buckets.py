"""An item's stock split into buckets: one hot row becomes several, each taken under its own
guard, so that buyers of one item stop queueing on one lock.

A bucket is the stock rows of an item that carry its number (``Stock.bucket``): one row per
bucket for a voucher, one per prize for a pool (each prize's rows share its units:
``Stock.head``). A buyer's home bucket is a hash of the user's id, so buyers spread evenly
and each comes back to the same bucket. When the home bucket has nothing left the take falls
over to the next bucket with stock, read unguarded in one query; it answers sold out only when
that one read finds every bucket empty (``StockStrategy.take``). A pool's draw chooses its
bucket by weight instead (:func:`weighted_route`), so that each prize keeps its exact odds.
The per-user rule needs no bucket: it is the record's backstop key and the user's lock, both
per item.

A unit taken from a bucket is written on its record (``stock_id``), and a release returns it
to that row, so a unit goes back to the bucket it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from random import Random

from django.db.models import Sum

from core.errors import InvalidInput

from .errors import SoldOut
from .models import Stock
from .records import MAX_BUCKETS

# Which bucket a take tries: given the bucket it just found empty under its guard (None
# before the first), the next one; ``SoldOut`` when no bucket has any stock.
Route = Callable[[int | None], int]

# Knuth's multiplicative hash: consecutive user ids (a crowd signed up in one go) land in
# different buckets rather than in runs.
_GOLDEN = 2_654_435_761


def buckets_valid(buckets: object) -> int:
    """``buckets`` as an item's bucket count; ``InvalidInput`` unless a whole number from 1
    to ``MAX_BUCKETS``."""
    if isinstance(buckets, bool) or not isinstance(buckets, int) or not 1 <= buckets <= MAX_BUCKETS:
        raise InvalidInput(f"buckets must be a whole number from 1 to {MAX_BUCKETS}.")
    return buckets


def home_bucket(user_id: int, buckets: int) -> int:
    """The bucket a user takes from first: the same one on every take of the item."""
    return (user_id * _GOLDEN) % 2**32 % buckets


def units_spread(units: int, buckets: int) -> list[int]:
    """``units`` over ``buckets`` as evenly as whole units allow: the first ones get the
    remainder, one each."""
    share, rest = divmod(units, buckets)
    return [share + (1 if bucket < rest else 0) for bucket in range(buckets)]


def buckets_with_units(group_id: int, quantity: int) -> set[int]:
    """The buckets of a group that hold a row with at least ``quantity`` units, read in one
    query, unguarded: when it finds none, no bucket had any at that moment."""
    return set(
        Stock.objects.filter(group_id=group_id, quantity__gte=quantity).values_list("bucket", flat=True).distinct()
    )


def next_bucket(after: int, candidates: set[int], buckets: int) -> int:
    """The first of ``candidates`` after ``after``, going round: buyers who fall over from
    different homes spread over the buckets left instead of all landing on one."""
    return min(candidates, key=lambda bucket: (bucket - after - 1) % buckets)


def bucket_units(group_id: int) -> dict[int, int]:
    """``{bucket: units left}`` of a group's buckets that hold any, read in one query,
    unguarded: a weighted route's view of where the stock is."""
    rows = Stock.objects.filter(group_id=group_id, quantity__gt=0).values("bucket").annotate(units=Sum("quantity"))
    return {bucket: int(units) for bucket, units in rows.order_by().values_list("bucket", "units")}


def home_route(*, group_id: int, user_id: int, buckets: int, quantity: int) -> Route:
    """A voucher's route: the user's home bucket first; after it, the next bucket round from
    the one tried that one unguarded read finds with stock; ``SoldOut`` when it finds none."""

    def route(tried: int | None) -> int:
        if tried is None:
            return home_bucket(user_id, buckets)
        left = buckets_with_units(group_id, quantity)
        if not left:
            raise SoldOut()
        return next_bucket(tried, left, buckets)

    return route


def weighted_route(
    *, group_id: int, buckets: int, nothing_weight: int, rng: Random, first: Mapping[int, int] | None = None
) -> Route:
    """A pool's route (docs/design.md, "Buckets"): bucket b with probability
    ``(T_b + w/B) / (T + w)``, where ``T_b`` is its units left (read unguarded, one query;
    ``first`` for the first try, when the caller already read them), ``T`` their sum, ``w``
    the weight of taking nothing and ``B`` the buckets. Each bucket carries its share ``w/B``
    of that weight, so the take then chooses within the bucket with ``w/B`` for nothing, and
    prize i comes out with ``sum_b S_ib / (T + w)``: its stock over the pool's total.

    Whole numbers only: every weight is scaled by ``B``, bucket b weighing ``B*T_b + w``.
    ``SoldOut`` when no bucket has any units; each try after the first reads them again.

    A bucket beyond ``B`` (a pool split into fewer keeps its rows there, empty, and a
    released unit goes back to its row) is routed to while it holds units, weighing
    ``B*T_b + w`` as well, since its take draws no prize by the same share: no unit is
    stranded, and while one waits there no prize weighs ``w/B`` more per such bucket."""
    known = first

    def route(tried: int | None) -> int:
        nonlocal known
        units, known = (known if known is not None else bucket_units(group_id)), None
        total = sum(max(0, left) for left in units.values())
        if total <= 0:
            raise SoldOut()
        routed = [*range(buckets), *sorted(b for b, left in units.items() if b >= buckets and left > 0)]
        ticket = rng.randrange(buckets * total + nothing_weight * len(routed))
        for bucket in routed:
            weight = buckets * max(0, units.get(bucket, 0)) + nothing_weight
            if ticket < weight:
                return bucket
            ticket -= weight
        raise AssertionError("the tickets add up to the weights")

    return route
