"""The stories the state machines found, each kept as a plain test a reader can follow
(``tests/model/test_machines.py``): the smallest sequence Hypothesis shrank a failure
to, written out, with what it showed.

Each story runs through the API where a buyer acts and through the services where staff,
the worker or the clock act, on the strategy the failure was found on.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.namespace import instance_key
from inventory.buckets import home_bucket
from inventory.holds import holds_expire_due
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_load
from orders.models import Order
from orders.product import VOUCHER
from orders.selectors import voucher_audit, voucher_get
from orders.services import voucher_update
from tests.records import answered_row
from tests.test_redis_lua import persist_voucher

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reservations_redis", "idempotency_keys", "payment_provider"),
    pytest.mark.model,
]


@pytest.fixture
def sale(make_voucher, api_client):
    """A voucher of two units under ``redis_lua`` with a minute to pay, and a buyer."""

    def make(**fields):
        voucher = make_voucher(stock=2, strategy="redis_lua", hold_seconds=60, abandon_cooldown_seconds=0, **fields)
        return voucher, api_client()

    return make


def test_a_switch_away_from_redis_lua_writes_what_it_reserved_and_its_buyer_may_cancel(sale):
    """Found as: take (202 pending), switch to db_pessimistic, cancel. The switch writes the
    reservation as a held order before the new strategy takes over, so the cancel finds it
    (200), and the unit is back once."""
    voucher, buyer = sale()
    taken = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()
    assert taken["status"] == "pending"

    voucher_update(voucher=voucher_get(voucher_id=voucher.pk), strategy="db_pessimistic")

    assert answered_row(Order, taken["order_id"]).status == Order.Status.HELD
    assert buyer.post(f"/api/orders/{taken['order_id']}/cancel").json()["status"] == "cancelled"
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.ok and audit.stock == 2 and audit.holds.released == 1


def test_a_switch_away_from_redis_lua_lets_the_deadline_release_what_it_reserved(sale):
    """Found as: take, switch away, time past the deadline, the deadline task. The written
    order keeps the deadline its reservation was given, and the expiry releases it once."""
    voucher, buyer = sale()
    taken = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()
    voucher_update(voucher=voucher_get(voucher_id=voucher.pk), strategy="db_atomic")
    order = answered_row(Order, taken["order_id"])

    assert holds_expire_due(VOUCHER, item_id=voucher.pk, now=order.hold_until + timedelta(seconds=1)) == 1
    assert holds_expire_due(VOUCHER, item_id=voucher.pk, now=order.hold_until + timedelta(seconds=2)) == 0
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.ok and audit.stock == 2 and audit.holds.returned_twice == 0


def test_spreading_redis_lua_units_again_writes_what_it_reserved_and_its_buyer_may_cancel(sale):
    """Found as: take (202 pending), rebucket to 2, cancel. Splitting the units left over
    more rows writes the waiting reservations first, so the order exists and cancels once."""
    voucher, buyer = sale()
    taken = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()

    voucher_update(voucher=voucher_get(voucher_id=voucher.pk), buckets=2)

    assert buyer.post(f"/api/orders/{taken['order_id']}/cancel").json()["status"] == "cancelled"
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.ok and audit.stock == 2 and audit.holds.released == 1


def test_a_take_refused_while_redis_lua_state_is_missing_is_not_kept_and_its_retry_sells(sale):
    """Found as: Redis restarts empty, a keyed take (503 ``unavailable``), rebucket, the same
    key again. The 503 did nothing and its key keeps nothing, so the retry runs afresh once
    the state is rebuilt from the database (here by the rebucket) and reserves (202)."""
    voucher, buyer = sale()
    client = reservations_client().client
    for key in client.scan_iter(match=instance_key("*"), count=1000):
        client.delete(key)
    url, key = f"/api/vouchers/{voucher.pk}/purchase", {"HTTP_IDEMPOTENCY_KEY": "story-retry-1"}
    refused = buyer.post(url, **key)
    assert (refused.status_code, refused.json()["code"]) == (503, "unavailable")

    voucher_update(voucher=voucher_get(voucher_id=voucher.pk), buckets=2)

    again = buyer.post(url, **key)
    assert (again.status_code, again.json()["status"]) == (202, "pending")


def test_a_take_just_after_a_rebucket_reserves_in_the_new_layout_not_a_state_that_is_gone(
    make_voucher, api_client, make_user
):
    """Found as: take, rebucket from 3 to 2, take (503 ``unavailable``, "being restored after a
    Redis restart", with no restart). A server process keeps a redis_lua item a second for its
    takes; the kept copy still said 3 buckets, so a buyer whose home is the third reserved in a
    state the new layout no longer has. The take now reads the item again when the state it
    looked for is missing and the layout changed, and reserves in the new one."""
    voucher = make_voucher(stock=3, strategy="redis_lua", hold_seconds=60, buckets=3)
    url = f"/api/vouchers/{voucher.pk}/purchase"
    assert api_client().post(url).status_code == 202  # this process keeps the item now
    third = next(user for user in iter(make_user, None) if home_bucket(user.pk, 3) == 2)

    voucher_update(voucher=voucher_get(voucher_id=voucher.pk), buckets=2)

    answer = api_client(third).post(url)
    assert (answer.status_code, answer.json()["status"]) == (202, "pending")


def test_reservations_are_numbered_in_their_own_state_after_a_rebucket_to_one_row_and_redis_lost_all(
    make_voucher, api_client, make_user
):
    """Found as: a take in the second bucket's state, its order written, rebucket to 1, Redis
    restarts empty, take (500). The state rebuilt from the database numbered on from the
    highest reservation id among all the voucher's orders, one of the earlier layout's second
    state, far above the first's range: the next number overflowed. A load now reads the last
    number of its own state's range only (``values.state_reservations``)."""
    voucher = make_voucher(stock=4, strategy="redis_lua", hold_seconds=60, buckets=2)
    url = f"/api/vouchers/{voucher.pk}/purchase"
    second = next(user for user in iter(make_user, None) if home_bucket(user.pk, 2) == 1)
    assert api_client(second).post(url).status_code == 202
    persist_voucher(voucher)
    voucher_update(voucher=voucher_get(voucher_id=voucher.pk), buckets=1)
    client = reservations_client().client
    for key in client.scan_iter(match=instance_key("*"), count=1000):
        client.delete(key)
    assert item_reservations_load(VOUCHER, item=voucher_get(voucher_id=voucher.pk))

    answer = api_client().post(url)

    assert (answer.status_code, answer.json()["status"]) == (202, "pending")


def test_a_take_by_an_item_read_before_a_rebucket_still_meets_its_buyers_rule(make_voucher, api_client, make_user):
    """Found as: take (202 pending), rebucket from 1 to 3, restock, take by the same buyer (202
    again: a second purchase); the restock plays no part. This process kept the voucher a
    second from before the rebucket, so the take routed the buyer by one state, to bucket 0's,
    which the new layout keeps other users' takes in: the buyer's own take was not there to
    refuse the second. Each state now names how many states its item has, and a take routed
    by another number is refused ``moved`` and read again."""
    voucher = make_voucher(stock=2, strategy="redis_lua", hold_seconds=60, abandon_cooldown_seconds=0)
    buyer = api_client(next(user for user in iter(make_user, None) if home_bucket(user.pk, 3) != 0))
    url = f"/api/vouchers/{voucher.pk}/purchase"
    assert buyer.post(url).json()["status"] == "pending"  # this process keeps the voucher now

    voucher_update(voucher=voucher_get(voucher_id=voucher.pk), buckets=3)

    again = buyer.post(url)
    assert (again.status_code, again.json()["code"]) == (409, "already_purchased")
    assert Order.objects.filter(voucher=voucher, user=buyer.user).count() == 1
