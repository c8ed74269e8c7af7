"""Rate limits counted in Redis, per item on sale: per user and per address, 429 with
Retry-After once over, every counter of a request in one script call (under ``redis_lua``
in the reserving script's own), and nothing counted when switched off."""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from core.namespace import instance_key
from core.ratelimit import RateLimited, rate_count
from inventory.models import Stock
from inventory.redis_lua.client import Reservations
from inventory.redis_lua.values import GroupKeys
from lottery.models import Draw
from orders.models import Order
from tests.stock import stock_row

TAG = "{group:999001}"


@pytest.fixture
def limits(settings):
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"test": {"user": (3, 1), "address": (5, 60)}}
    clients = {redis.Redis.from_url(url) for url in (settings.LOCK_REDIS_URL, settings.RESERVATIONS_REDIS_URL)}

    def clear():
        for client in clients:
            for key in client.scan_iter(match=instance_key("rate:*")):
                client.delete(key)

    clear()
    yield redis.Redis.from_url(settings.LOCK_REDIS_URL)
    clear()


def hit(user_id, address, *, action="test", tag=TAG) -> None:
    rate = rate_count(action=action, user_id=user_id, address=address)
    if rate is not None:
        rate.count(tag=tag)


def test_a_user_over_the_limit_is_told_when_to_come_back(limits):
    for _ in range(3):
        hit(1, "10.0.0.1")
    with pytest.raises(RateLimited) as refused:
        hit(1, "10.0.0.1")
    assert refused.value.status == 429 and refused.value.code == "rate_limited"
    assert refused.value.retry_after == 1  # the user's window is a second
    hit(2, "10.0.0.1")  # another user from the same address


def test_an_address_over_its_limit_is_refused_whoever_asks(limits):
    for user in range(5):
        hit(user, "10.0.0.2")
    with pytest.raises(RateLimited) as refused:
        hit(99, "10.0.0.2")
    assert 1 < refused.value.retry_after <= 60  # the address's window is a minute
    hit(99, "10.0.0.3")


def test_limits_hold_per_item_under_the_items_hash_tag(limits):
    for _ in range(3):
        hit(1, "10.0.0.7")
    with pytest.raises(RateLimited):
        hit(1, "10.0.0.7")
    hit(1, "10.0.0.7", tag="{group:999002}")  # another sale counts on its own
    assert limits.get(instance_key(f"rate:{TAG}:test:user:1")) == b"4"
    assert limits.get(instance_key(f"rate:{TAG}:test:address:10.0.0.7")) == b"4"


def test_switched_off_nothing_is_counted(limits, settings):
    settings.RATE_LIMITS_ENABLED = False
    assert rate_count(action="test", user_id=1, address="10.0.0.4") is None
    assert not list(limits.scan_iter(match=instance_key("rate:*")))


def test_an_action_without_limits_counts_nothing(limits):
    assert rate_count(action="unknown", user_id=1, address="10.0.0.5") is None


def test_redis_out_of_reach_lets_the_request_through(limits, settings, caplog):
    settings.LOCK_REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens there
    for _ in range(5):
        hit(1, "10.0.0.6")
    assert "rate limits not counted" in caplog.text


@pytest.mark.django_db
def test_a_buyer_over_the_limit_hears_429_through_the_api_and_the_page(limits, settings, api_client, make_voucher):
    settings.RATE_LIMITS = {"purchase": {"user": (2, 60)}}
    voucher = make_voucher(stock=5)
    buyer = api_client()
    answers = [buyer.post(f"/api/vouchers/{voucher.pk}/purchase").status_code for _ in range(2)]
    assert answers == [201, 409]  # bought, then already_purchased: both counted
    refused = buyer.post(f"/api/vouchers/{voucher.pk}/purchase")
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert int(refused["Retry-After"]) >= 1
    page = Client()
    page.force_login(buyer.user)
    assert b"Too many requests" in page.post(f"/vouchers/{voucher.pk}/buy").content
    other = make_voucher(stock=5)  # the limit is this voucher's
    assert buyer.post(f"/api/vouchers/{other.pk}/purchase").status_code == 201
    assert Order.objects.filter(user=buyer.user).count() == 2


@pytest.mark.django_db(transaction=True)
def test_under_redis_lua_the_limit_is_counted_by_the_reserving_script_and_reserves_nothing(
    limits, settings, api_client, make_voucher, make_pool, reservations_redis
):
    settings.RATE_LIMITS = {"purchase": {"address": (3, 60)}, "draw": {"user": (2, 60)}}
    voucher = make_voucher(stock=10, strategy="redis_lua")
    keys = GroupKeys.of(voucher.group_id)
    buyers = [api_client() for _ in range(4)]
    answers = [buyer.post(f"/api/vouchers/{voucher.pk}/purchase").status_code for buyer in buyers]
    assert answers == [202, 202, 202, 429]  # one address: the test client's
    assert Reservations(reservations_redis).stock(group_id=voucher.group_id) == {stock_row(voucher): 7}
    assert reservations_redis.xlen(keys.pending) == 3
    # The counter is the voucher's own key, in the reservations' Redis, beside its state.
    counter = instance_key(f"rate:{{group:{voucher.group_id}}}:purchase:address:127.0.0.1")
    assert reservations_redis.get(counter) == b"4"

    pool = make_pool(strategy="redis_lua", draws_per_user=5, prizes=[("A", 10)])
    drawer = api_client()
    answers = [drawer.post(f"/api/pools/{pool.pk}/draw").status_code for _ in range(3)]
    assert answers == [202, 202, 429]
    refused = drawer.post(f"/api/pools/{pool.pk}/draw")
    assert refused.json()["code"] == "rate_limited" and int(refused["Retry-After"]) >= 1
    assert Reservations(reservations_redis).takes(group_id=pool.group_id, user_id=drawer.user.pk) == 2
    assert not Draw.objects.exists() and not Order.objects.exists()
    assert Stock.objects.get(pk=stock_row(voucher)).quantity == 10  # nothing written yet either way


def test_every_call_that_takes_an_idempotency_key_is_limited_per_user_and_address(settings):
    """Each such call may leave a kept answer in Redis for a day: none of them is unlimited."""
    from lottery.api import CLAIM, DRAW
    from orders.api import CANCEL, PURCHASE
    from payments.api import PAY

    for call in (PURCHASE, DRAW, PAY, CANCEL, CLAIM):
        assert set(settings.RATE_LIMITS.get(call.action, {})) == {"user", "address"}, call.action
