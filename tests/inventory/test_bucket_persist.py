"""A bucketed voucher's states persisted to MariaDB: each state's stream written by its own
consumer, a borrowed unit decrementing the row it came from (the database takes no part in a
move), and every row's units in Redis and the database agreeing after."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
import redis
from django.conf import settings
from django.db import connection

from inventory.buckets import home_bucket
from inventory.models import Stock
from inventory.redis_lua.bucket_states import item_states, reserve_at_home, states_load
from inventory.redis_lua.client import Reservations
from inventory.redis_lua.drain import _lock_name
from inventory.redis_lua.item_states import item_reservations_persist
from inventory.redis_lua.reconcile_buckets import states_check
from inventory.redis_lua.transfers import Transfers
from inventory.redis_lua.values import GroupKeys, Rules, state_id
from orders.models import Order
from orders.product import VOUCHER

pytestmark = pytest.mark.django_db(transaction=True)

BUCKETS = 4


@pytest.fixture
def client():
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


def test_a_bucket_state_shares_its_groups_lock():
    assert _lock_name(state_id(77, 3)) == _lock_name(77) == "reservations:77"


def test_each_states_stream_is_persisted_and_borrowed_units_decrement_their_own_row(client, make_voucher, make_user):
    voucher = make_voucher(stock=8, buckets=BUCKETS, strategy="db_atomic")
    rows = list(Stock.objects.filter(group_id=voucher.group_id).order_by("bucket").values_list("id", "quantity"))
    assert len(rows) == BUCKETS
    # Bucket 1 starts with every unit: the buyers at home elsewhere borrow from it.
    Stock.objects.filter(pk=rows[1][0]).update(quantity=8)
    Stock.objects.filter(pk__in=[rows[0][0], rows[2][0], rows[3][0]]).update(quantity=0)
    states = item_states(voucher.group_id, BUCKETS)
    for state in states:
        client.delete(*GroupKeys.of(state).all())
    reservations, transfers = Reservations(client), Transfers(client)
    rules = Rules(begin_at=voucher.begin_at, end_at=voucher.end_at, limit=1)
    states_load(reservations, states, rules=rules, stock=[{row: 8 if b == 1 else 0} for b, (row, _) in enumerate(rows)])
    users = [make_user() for _ in range(12)]
    answers = [reserve_at_home(reservations, transfers, states, user_id=u.pk, rand=random.random()) for u in users]
    sold = [answer for answer in answers if answer.refusal is None]
    assert len(sold) == 8
    assert {answer.refusal for answer in answers} == {None, "sold_out"}
    assert Counter(answer.stock_id for answer in sold) == {rows[1][0]: 8}  # borrowed units keep their row
    assert sum(client.xlen(GroupKeys.of(state).pending) for state in states[::2]) > 0

    def persist(state: int) -> None:
        try:
            item_reservations_persist(
                VOUCHER, item_id=voucher.pk, group_id=state, reservations=Reservations(client), consumer=f"c{state}"
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=persist, args=(state,)) for state in states]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert Order.objects.filter(voucher=voucher).count() == 8
    assert set(Order.objects.filter(voucher=voucher).values_list("reservation", flat=True)) == {
        answer.reservation_id for answer in sold
    }
    assert Stock.objects.get(pk=rows[1][0]).quantity == 0
    assert all(not client.xlen(GroupKeys.of(state).pending) for state in states)
    for state in states:
        client.delete(*GroupKeys.of(state).all())


def test_the_states_are_checked_per_row_across_states_and_per_user_at_home(client, make_voucher, make_user):
    voucher = make_voucher(stock=8, buckets=BUCKETS, strategy="db_atomic")
    rows = dict(Stock.objects.filter(group_id=voucher.group_id).values_list("id", "bucket"))
    states = item_states(voucher.group_id, BUCKETS)
    for state in states:
        client.delete(*GroupKeys.of(state).all())
    reservations, transfers = Reservations(client), Transfers(client)
    rules = Rules(begin_at=voucher.begin_at, end_at=voucher.end_at, limit=1)
    by_bucket = {bucket: row for row, bucket in rows.items()}
    stock = [{by_bucket[b]: Stock.objects.get(pk=by_bucket[b]).quantity} for b in range(BUCKETS)]
    states_load(reservations, states, rules=rules, stock=stock)
    users = [make_user() for _ in range(5)]
    for user in users:
        assert reserve_at_home(reservations, transfers, states, user_id=user.pk, rand=0.5).refusal is None
    left = [one.left for one in transfers.units(states)]
    fullest = states[left.index(max(left))]
    assert transfers.move(giver=fullest, receiver=next(s for s in states if s != fullest), most=1) == 1
    left = [one.left for one in transfers.units(states)]
    fullest = states[left.index(max(left))]
    assert transfers.out(giver=fullest, receiver=next(s for s in states if s != fullest), most=1)  # left in transit

    def check(repair: bool = False):
        records = VOUCHER.taking(VOUCHER.records(voucher.pk))
        return states_check(
            group_id=voucher.group_id,
            states=states,
            reservations=reservations,
            database_stock=lambda: dict(Stock.objects.filter(group_id=voucher.group_id).values_list("id", "quantity")),
            database_takes=lambda: VOUCHER.takes(records),
            database_takes_total=records.count,
            row_buckets=lambda: rows,
            repair=repair,
        )

    assert not check().drifted  # 5 pending, one unit moved, one in transit: whole
    client.hdel(GroupKeys.of(states[home_bucket(users[0].pk, BUCKETS)]).state, users[0].pk)  # a mark lost
    reservations.add_units(group_id=states[3], stock_id=by_bucket[0], units=2)  # two units too many
    found = check(repair=True)
    assert found.drifted and found.repaired
    assert found.takers == {users[0].pk: (0, 1)}
    ((row, (have, want)),) = found.stock.items()
    assert row == by_bucket[0] and have - want == 2
    assert not check().drifted
    # Taken back where units of that row were: no state left below zero.
    assert all(units >= 0 for state in states for units in reservations.stock(group_id=state).values())
    for state in states:
        client.delete(*GroupKeys.of(state).all())
