"""Rows that share one thing's units over buckets (``Stock.head``, a pool's prize), the weighted
route a pool's draw takes to a bucket, and ``db_optimistic``'s compare of a bucket's rows."""

from __future__ import annotations

import random

import pytest
from django.db import transaction
from django.db.models import F

from inventory.buckets import weighted_route
from inventory.errors import SoldOut, SupplyLimit
from inventory.models import Stock
from inventory.services import MAX_UNITS, stock_group_create, stock_shares, stock_shares_create, stock_shares_restock
from inventory.strategies import STRATEGIES
from inventory.strategies.base import Held, Take

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_things_units_are_spread_over_rows_that_share_its_head_and_restocked_all_or_nothing():
    group = stock_group_create()
    head = stock_shares_create(group=group, units=10, buckets=4)
    rows = Stock.objects.filter(head_id=head.pk).order_by("pk")
    assert list(rows.values_list("bucket", "quantity", "head_id")) == [
        (b, q, head.pk) for b, q in enumerate([3, 3, 2, 2])
    ]
    assert head.head_id == head.pk and head.bucket == 0
    ids = list(stock_shares(head_id=head.pk))
    assert stock_shares_restock(head_id=head.pk, quantity=5) == dict(zip(ids, [2, 1, 1, 1], strict=True))
    assert list(stock_shares(head_id=head.pk).values()) == [5, 4, 3, 3]

    # One row would pass its supply's bound: no row is restocked.
    Stock.objects.filter(pk=ids[-1]).update(initial_quantity=MAX_UNITS)
    with pytest.raises(SupplyLimit):
        stock_shares_restock(head_id=head.pk, quantity=8)
    assert list(stock_shares(head_id=head.pk).values()) == [5, 4, 3, 3]


def test_the_weighted_route_weighs_each_bucket_by_its_units_and_its_share_of_nothing():
    group = stock_group_create()
    stock_shares_create(group=group, units=0, buckets=3)
    with pytest.raises(SoldOut):  # no unit in any bucket, whatever the weight of nothing
        weighted_route(group_id=group.pk, buckets=3, nothing_weight=5, rng=random.Random(1))(None)

    only = weighted_route(group_id=group.pk, buckets=3, nothing_weight=0, rng=random.Random(1), first={2: 4})
    assert {only(None)} == {2}
    rng = random.Random(7)
    counts = [0, 0, 0]
    for _ in range(3_000):  # bucket 2 weighs 3*4 + 3, the empty ones 3 each: 15/21, 3/21, 3/21
        counts[weighted_route(group_id=group.pk, buckets=3, nothing_weight=3, rng=rng, first={2: 4})(None)] += 1
    assert counts[0] > 300 and counts[1] > 300 and 2_000 < counts[2] < 2_300, counts


@pytest.mark.parametrize("empty", [True, False])
def test_a_bucket_without_stock_takes_nothing_only_when_it_carries_a_share_of_nothing(empty):
    """With ``choose_empty`` an empty bucket is asked to choose (a pool with a weight of no
    prize draws no prize there); without it the take falls over to the bucket with stock."""
    group = stock_group_create()
    head = stock_shares_create(group=group, units=1, buckets=2)  # bucket 0: 1, bucket 1: 0
    routes = iter([1, 0])
    take = Take(
        group_id=group.pk,
        choose=lambda remaining: min(remaining) if remaining else None,
        check=lambda: None,
        record=lambda stock_id, guarded: stock_id,
        kind="test",
        item_id=group.pk,
        user_id=1,
        buckets=2,
        route=lambda tried: next(routes),
        choose_empty=empty,
    )
    assert STRATEGIES["db_pessimistic"].take(take) == (None if empty else head.pk)


def test_db_optimistic_writes_a_bucket_only_while_none_of_its_rows_changed():
    """A pool's choice in a bucket weighs every row of it: a change of any of them since the
    read (another take, a restock) sends the take back to read and choose again."""
    group = stock_group_create()
    gold, silver = (stock_shares_create(group=group, units=4, buckets=2) for _ in range(2))
    bucket = {gold.pk: 2, silver.pk: 2}
    strategy = STRATEGIES["db_optimistic"]
    take = Take(group_id=group.pk, choose=min, check=lambda: None, record=lambda s, g: s, buckets=2)
    with transaction.atomic():
        held = Held(bucket=0)
        assert strategy.read(take, held, 0) == bucket
        Stock.objects.filter(pk=silver.pk).update(version=F("version") + 1)  # silver moved since
        assert strategy.write(take, held, gold.pk, bucket) is False
        assert strategy.read(take, held, 1) == bucket
        assert strategy.write(take, held, gold.pk, bucket) is True
    assert dict(Stock.objects.filter(bucket=0, group=group).values_list("pk", "quantity")) == {gold.pk: 1, silver.pk: 2}
