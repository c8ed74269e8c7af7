"""A group split into buckets, under every strategy that takes in the request: the take reads
and guards its home bucket, falls over to a bucket with stock when its own is empty, and answers
sold out only when every bucket is; a guard held on one bucket never stops a take from another."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import connection

from core.errors import InvalidInput
from inventory.buckets import buckets_valid, home_bucket, next_bucket, units_spread
from inventory.errors import LockBusy, SoldOut
from inventory.models import Stock, StockGroup
from inventory.services import stock_create, stock_group_create, stock_group_create_spread, stock_group_restock
from inventory.strategies import STRATEGIES, strategy_names
from inventory.strategies.base import Take, choose_first
from inventory.strategies.redis_lock import stock_lock_name

from ..stock import stock_rows_held

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redlock_urls")]

ALL = strategy_names(deferred=False)
BUCKETS = 4


def bucketed(*quantities: int) -> tuple[StockGroup, list[int]]:
    """A group with one row per bucket holding ``quantities``."""
    group = stock_group_create()
    return group, [stock_create(group=group, quantity=q, bucket=b).pk for b, q in enumerate(quantities)]


def user_homed_in(bucket: int, buckets: int = BUCKETS, *, skip: int = 0) -> int:
    """A user id whose home bucket is ``bucket`` (the ``skip``-th such id)."""
    found = (user_id for user_id in range(1, 10_000) if home_bucket(user_id, buckets) == bucket)
    for _ in range(skip):
        next(found)
    return next(found)


def a_take(group: StockGroup, user_id: int, buckets: int = BUCKETS) -> Take:
    return Take(
        group_id=group.pk,
        choose=choose_first,
        check=lambda: None,
        record=lambda stock_id, guarded: stock_id,
        kind="test",
        item_id=group.pk,
        user_id=user_id,
        buckets=buckets,
    )


def quantities(ids: list[int]) -> list[int]:
    by_id = dict(Stock.objects.filter(pk__in=ids).values_list("id", "quantity"))
    return [by_id[stock_id] for stock_id in ids]


def test_units_spread_evenly_and_add_up():
    assert units_spread(10, 4) == [3, 3, 2, 2]
    assert units_spread(3, 8) == [1, 1, 1, 0, 0, 0, 0, 0]
    assert units_spread(0, 2) == [0, 0]
    assert sum(units_spread(1_000_003, 64)) == 1_000_003


def test_home_buckets_spread_consecutive_users_evenly():
    homes = Counter(home_bucket(user_id, 8) for user_id in range(1, 8001))
    assert set(homes) == set(range(8))
    assert max(homes.values()) - min(homes.values()) < 100, homes
    assert home_bucket(4242, 8) == home_bucket(4242, 8)


@pytest.mark.parametrize("value", [0, 65, -1, True, 2.0, "4", None])
def test_buckets_out_of_range_are_refused(value):
    with pytest.raises(InvalidInput, match="buckets must be a whole number from 1 to 64"):
        buckets_valid(value)


def test_falling_over_goes_round_from_home():
    assert next_bucket(2, {0, 1, 3}, 4) == 3
    assert next_bucket(3, {0, 1}, 4) == 0
    assert next_bucket(1, {1}, 4) == 1


def test_a_group_is_made_and_restocked_spread_over_its_buckets():
    group = stock_group_create_spread(units=10, buckets=4)
    rows = list(Stock.objects.filter(group=group).order_by("id").values_list("bucket", "quantity", "initial_quantity"))
    assert rows == [(0, 3, 3), (1, 3, 3), (2, 2, 2), (3, 2, 2)]
    added = stock_group_restock(group_id=group.pk, quantity=5, buckets=4)
    assert sorted(added.values()) == [1, 1, 1, 2]
    assert [q for _, q in Stock.objects.filter(group=group).order_by("id").values_list("bucket", "quantity")] == [
        5, 4, 3, 3,
    ]  # fmt: skip


@pytest.mark.parametrize("strategy", ALL)
def test_a_take_reads_its_home_bucket_first(strategy):
    group, ids = bucketed(5, 5, 5, 5)
    taken = STRATEGIES[strategy].take(a_take(group, user_homed_in(2)))
    assert taken == ids[2]
    assert quantities(ids) == [5, 5, 4, 5]


@pytest.mark.parametrize("strategy", ALL)
def test_an_empty_home_falls_over_to_a_bucket_with_stock_and_sold_out_waits_for_the_last(strategy):
    group, ids = bucketed(0, 1, 0, 1)
    strategy_ = STRATEGIES[strategy]
    first = strategy_.take(a_take(group, user_homed_in(2)))
    assert first == ids[3]  # the next bucket round from 2 with stock
    second = strategy_.take(a_take(group, user_homed_in(2, skip=1)))
    assert second == ids[1]
    with pytest.raises(SoldOut):
        strategy_.take(a_take(group, user_homed_in(0)))
    assert quantities(ids) == [0, 0, 0, 0]


def test_db_pessimistic_locks_only_the_bucket_it_takes_from():
    """A transaction holds bucket 0's row; a take from bucket 1 goes through meanwhile (a
    take that waited for that lock would fail on the short lock wait instead)."""
    group, ids = bucketed(3, 3)
    with stock_rows_held(ids[0]):
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
        try:
            taken = STRATEGIES["db_pessimistic"].take(a_take(group, user_homed_in(1, 2), buckets=2))
            assert taken == ids[1]
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")
    assert quantities(ids) == [3, 2]


@pytest.mark.parametrize("strategy", ["redis_lock", "redlock"])
def test_lock_strategies_lock_only_the_bucket_they_take_from(strategy, settings):
    """Bucket 0's lock is held elsewhere; a take from bucket 1 goes through, and a take from
    bucket 0 waits its short wait and is told busy."""
    settings.LOCK_WAIT_SECONDS = 0.2
    group, ids = bucketed(3, 3)
    holder = STRATEGIES[strategy]._lock(stock_lock_name(group.pk, 0), blocking=False)
    assert holder.acquire() is not None
    try:
        assert STRATEGIES[strategy].take(a_take(group, user_homed_in(1, 2), buckets=2)) == ids[1]
        with pytest.raises(LockBusy):
            STRATEGIES[strategy].take(a_take(group, user_homed_in(0, 2), buckets=2))
    finally:
        holder.release()
    assert quantities(ids) == [3, 2]


def test_bucket_zero_keeps_the_groups_lock_name():
    """Fences are per lock name: a row must be written under one name for ever."""
    assert stock_lock_name(7, None) == stock_lock_name(7, 0) == "stock-group:7"
    assert stock_lock_name(7, 3) == "stock-group:7:3"
