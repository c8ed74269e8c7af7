"""A redis_lua take is written with the hold window in force when it was reserved: staff
may change a voucher's payment window or a pool's claim window while reservations wait in
the stream, and the worker that writes them later must not give them the new one (a take
reserved with a window to pay written paid, or a free one written held).

Real Redis and database; persisting runs in the test's process, as the drain task does.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inventory.redis_lua.values import GroupKeys, Pending
from inventory.redis_lua.windows import hold_windows
from lottery.models import Draw
from lottery.services import pool_update
from orders.models import Order
from orders.services import voucher_update

from .test_redis_lua import persist_pool, persist_voucher, purchase

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]


def reserved_at(client, group_id: int) -> datetime:
    """When the one reservation waiting in the group's stream was made (its entry's ``at``)."""
    [(_, fields)] = client.xrange(GroupKeys.of(group_id).pending)
    return datetime.fromtimestamp(int(fields[b"at"]) / 1000, tz=UTC)


def test_a_voucher_reserved_with_a_payment_window_is_written_held_after_the_window_became_0(
    api_client, make_voucher, reservations_redis
):
    voucher = make_voucher(stock=2, strategy="redis_lua", hold_seconds=600)
    assert purchase(api_client(), voucher).status_code == 202
    at = reserved_at(reservations_redis, voucher.group_id)
    voucher_update(voucher=voucher, hold_seconds=0)
    assert persist_voucher(voucher) == 1
    order = Order.objects.get(voucher=voucher)
    assert (order.status, order.hold_until) == (Order.Status.HELD, at + timedelta(seconds=600))


def test_a_voucher_reserved_without_a_payment_window_is_written_confirmed_after_one_was_set(
    api_client, make_voucher, reservations_redis
):
    voucher = make_voucher(stock=2, strategy="redis_lua", hold_seconds=0)
    assert purchase(api_client(), voucher).status_code == 202
    voucher_update(voucher=voucher, hold_seconds=600)
    assert persist_voucher(voucher) == 1
    order = Order.objects.get(voucher=voucher)
    assert (order.status, order.hold_until) == (Order.Status.CONFIRMED, None)
    # A purchase after the change is held for the new window.
    assert purchase(api_client(), voucher).status_code == 202
    at = reserved_at(reservations_redis, voucher.group_id)
    assert persist_voucher(voucher) == 1
    later = Order.objects.filter(voucher=voucher).exclude(pk=order.pk).get()
    assert (later.status, later.hold_until) == (Order.Status.HELD, at + timedelta(seconds=600))


def test_a_draw_reserved_with_a_claim_window_is_written_held_after_the_window_became_0(
    api_client, make_pool, reservations_redis
):
    pool = make_pool(prizes=(("Gold", 2),), draws_per_user=1, strategy="redis_lua", hold_seconds=600)
    assert api_client().post(f"/api/pools/{pool.pk}/draw").status_code == 202
    at = reserved_at(reservations_redis, pool.group_id)
    pool_update(pool=pool, hold_seconds=0)
    assert persist_pool(pool) == 1
    draw = Draw.objects.get(pool=pool)
    assert (draw.status, draw.hold_until) == (Draw.Status.HELD, at + timedelta(seconds=600))


def test_a_draw_reserved_without_a_claim_window_is_written_confirmed_after_one_was_set(api_client, make_pool):
    pool = make_pool(prizes=(("Gold", 2),), draws_per_user=1, strategy="redis_lua", hold_seconds=0)
    assert api_client().post(f"/api/pools/{pool.pk}/draw").status_code == 202
    pool_update(pool=pool, hold_seconds=600)
    assert persist_pool(pool) == 1
    draw = Draw.objects.get(pool=pool)
    assert (draw.status, draw.hold_until) == (Draw.Status.CONFIRMED, None)


def test_windows_changed_twice_while_reservations_wait_each_keep_theirs(api_client, make_voucher, reservations_redis):
    voucher = make_voucher(stock=3, strategy="redis_lua", hold_seconds=600)
    buyers = [api_client() for _ in range(3)]
    for buyer, then in zip(buyers, (0, 300, None), strict=True):
        assert purchase(buyer, voucher).status_code == 202
        if then is not None:
            voucher_update(voucher=voucher, hold_seconds=then)
    entries = reservations_redis.xrange(GroupKeys.of(voucher.group_id).pending)
    at = [datetime.fromtimestamp(int(fields[b"at"]) / 1000, tz=UTC) for _, fields in entries]
    assert persist_voucher(voucher) == 3
    orders = {one.user_id: one for one in Order.objects.filter(voucher=voucher)}
    written = [(orders[buyer.user.pk].status, orders[buyer.user.pk].hold_until) for buyer in buyers]
    assert written == [
        (Order.Status.HELD, at[0] + timedelta(seconds=600)),
        (Order.Status.CONFIRMED, None),
        (Order.Status.HELD, at[2] + timedelta(seconds=300)),
    ]


def test_a_reservation_whose_window_the_state_cannot_say_takes_the_items_window_now():
    one = Pending.from_entry(5, "1-0", {"user": "7", "stock": "3", "seq": "1", "at": "1000"})
    read = []
    windows = [replace(one, hold_seconds=0), replace(one, hold_seconds=600)]
    assert hold_windows(windows, lambda: read.append(1) or 30) == [0, 600]
    assert not read  # every one said its own: the item is not read
    assert hold_windows([one, replace(one, hold_seconds=0)], lambda: 30) == [30, 0]
