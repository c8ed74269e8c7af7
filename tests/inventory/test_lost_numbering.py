"""A state whose every key Redis lost is rebuilt with a counter above every number an earlier
load of it could have handed out, also when nothing reached the database in between: the
ids answered 202 by the lost Redis are never answered to other buyers (docs/design.md,
"redis_lua: reservations in Redis, records by Celery")."""

from __future__ import annotations

import itertools

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from inventory.models import LostCounterFloor, Stock
from inventory.redis_lua.bucket_states import item_states
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_buckets import item_bucketed
from inventory.redis_lua.item_states import item_reservations_reconcile, item_reservations_start
from inventory.redis_lua.numbering import lost_floor_record, state_last_reservation
from inventory.redis_lua.values import LOST_NUMBERS_GAP, GroupKeys, reservation_group, reservation_id
from lottery.product import POOL
from orders.models import Order
from orders.product import VOUCHER
from tests.plans import analyze, explain, insert_series
from tests.stock import stock_row

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]

RESERVED_EACH_TIME = 3
_users = itertools.count(1)


@pytest.fixture(params=["voucher", "bucketed voucher", "pool"])
def item(request, make_voucher, make_pool):
    """An item under redis_lua, its state loaded as its creation loads it, and its product."""
    if request.param == "pool":
        return POOL, make_pool(prizes=(("Gold", 50),), draws_per_user=1, strategy="redis_lua")
    buckets = 4 if request.param == "bucketed voucher" else 1
    voucher = make_voucher(stock=50, strategy="redis_lua", buckets=buckets)
    assert item_bucketed(VOUCHER, voucher) == buckets
    return VOUCHER, voucher


def states_of(product, item) -> list[int]:
    return item_states(product.group_of(item), item_bucketed(product, item))


def reserve_in_every_state(product, item) -> list[int]:
    """Reserve a few units in each of the item's states; the ids answered."""
    reservations = reservations_client()
    answered = []
    states = states_of(product, item)
    for state in states:
        for _ in range(RESERVED_EACH_TIME):
            reserved = reservations.reserve(group_id=state, user_id=next(_users), rand=0.0, states=len(states))
            assert reserved.refusal is None, reserved
            answered.append(reserved.reservation_id)
    return answered


def numbers_by_state(answered: list[int]) -> dict[int, list[int]]:
    """Each state's reservation numbers among ``answered`` ids, ascending."""
    found: dict[int, list[int]] = {}
    for one in sorted(answered):
        state = reservation_group(one)
        found.setdefault(state, []).append(one - reservation_id(state, 1) + 1)
    return found


def recorded_floors(product, item) -> dict[int, int]:
    """Bucket -> the floor its state's last lost counter started from."""
    return dict(LostCounterFloor.objects.filter(group_id=product.group_of(item)).values_list("bucket", "floor"))


def lose_and_rebuild(product, item) -> None:
    """Every key of the item's states gone, as a Redis restarted without persistence leaves
    it, then the rebuild a take's ``unavailable`` or the beat asks for."""
    reservations = reservations_client()
    for state in states_of(product, item):
        reservations.client.delete(*GroupKeys.of(state).all())
    assert reservations.stock(group_id=product.group_of(item)) is None
    item_reservations_reconcile(product, item=item, reservations=reservations)
    assert all(reservations.stock(group_id=state) is not None for state in states_of(product, item))


def test_ids_answered_before_redis_lost_everything_are_never_answered_again(item):
    product, item = item
    answered = reserve_in_every_state(product, item)
    for _ in range(2):  # lost twice in a row, nothing written to the database meanwhile
        lose_and_rebuild(product, item)
        answered += reserve_in_every_state(product, item)
    assert len(answered) == len(set(answered)), sorted(answered)
    assert {reservation_group(one) for one in answered} == set(states_of(product, item))


def test_a_state_dropped_with_its_counter_kept_counts_on_and_spends_no_gap(item):
    product, item = item
    floors = recorded_floors(product, item)
    assert sorted(floors) == list(range(len(states_of(product, item))))  # the creation's load found none
    before = numbers_by_state(reserve_in_every_state(product, item))
    item_reservations_start(product, item=item)  # persisted, dropped, loaded again
    after = numbers_by_state(reserve_in_every_state(product, item))
    assert recorded_floors(product, item) == floors
    assert {state: numbers[0] for state, numbers in after.items()} == {
        state: numbers[-1] + 1 for state, numbers in before.items()
    }


def test_a_floor_written_by_a_loader_that_died_before_loading_is_passed_too(item):
    """The floor is committed before LOAD: a loader that dies in between leaves a floor no
    counter started from, and the next loss starts past it, a gap wasted, no id reused."""
    product, item = item
    answered = reserve_in_every_state(product, item)
    written = {state: lost_floor_record(state, 0) for state in states_of(product, item)}
    lose_and_rebuild(product, item)
    answered += reserve_in_every_state(product, item)
    assert len(answered) == len(set(answered))
    after = numbers_by_state(answered)
    assert {state: numbers[-RESERVED_EACH_TIME] for state, numbers in after.items()} == {
        state: floor + LOST_NUMBERS_GAP + 1 for state, floor in written.items()
    }


@pytest.mark.parametrize("item", ["voucher", "bucketed voucher"], indirect=True)
def test_a_lost_counter_starts_past_the_numbers_of_released_orders_too(item, make_user):
    """A released order (cancelled, expired) counts against no one's limit, yet keeps its
    unique reservation id: a counter rebuilt from the orders that count alone started
    ``LOST_NUMBERS_GAP`` past the last of those, below a released one's number further on,
    and an id answered again met that row (``persisted``), counted repeated, never written."""
    product, item = item
    reserve_in_every_state(product, item)
    floors = recorded_floors(product, item)
    released = {}
    for bucket, state in enumerate(states_of(product, item)):
        # Numbered further than the gap past everything the state had handed out.
        released[state] = reservation_id(state, floors[bucket] + 2 * LOST_NUMBERS_GAP)
        Order.objects.create(
            user=make_user(),
            voucher=item,
            stock_id=Stock.objects.filter(group_id=product.group_of(item)).values_list("id", flat=True).first(),
            status=Order.Status.CANCELLED,
            reservation=released[state],
            hold_until=timezone.now(),
            released_at=timezone.now(),
            releases=1,
        )
    lose_and_rebuild(product, item)
    answered = reserve_in_every_state(product, item)
    assert all(one > released[reservation_group(one)] for one in answered), (sorted(answered), released)
    assert recorded_floors(product, item) == {bucket: floors[bucket] + 3 * LOST_NUMBERS_GAP for bucket in floors}


@pytest.mark.skipif(connection.vendor != "mysql", reason="reads MariaDB's EXPLAIN")
def test_a_states_last_reservation_is_the_end_of_a_range_of_the_unique_index(make_voucher, make_user):
    """20,000 orders of one voucher numbered in its state, two in three released: its last
    number, read of every record, is one entry of the index, not a read of each order."""
    voucher = make_voucher(stock=1)
    first = reservation_id(voucher.group_id, 1)
    insert_series(
        "orders_order",
        20_000,
        {
            "voucher_id": str(voucher.pk),
            "stock_id": str(stock_row(voucher)),
            "user_id": str(make_user().pk),
            "status": "IF(seq % 3, 'cancelled', 'paid')",
            "reservation": f"{first} - 1 + seq",
            "releases": "IF(seq % 3, 1, 0)",
            "created_at": "NOW(6)",
        },
    )
    analyze("orders_order")
    with CaptureQueriesContext(connection) as captured:
        assert state_last_reservation(VOUCHER, voucher.group_id) == first - 1 + 20_000
    (query,) = captured.captured_queries
    assert [row["Extra"] for row in explain(query["sql"])] == ["Select tables optimized away"]
