"""Rate limits counted in Redis: per user and per address, 429 with Retry-After once over,
every counter of a request in one script call, and nothing counted when switched off."""

from __future__ import annotations

import pytest
import redis

from core.ratelimit import RateLimited, rate_limit


@pytest.fixture
def limits(settings):
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"test": {"user": (3, 1), "address": (5, 60)}}
    client = redis.Redis.from_url(settings.LOCK_REDIS_URL)
    for key in client.scan_iter(match="rate:test:*"):
        client.delete(key)
    yield client
    for key in client.scan_iter(match="rate:test:*"):
        client.delete(key)


def test_a_user_over_the_limit_is_told_when_to_come_back(limits):
    for _ in range(3):
        rate_limit(action="test", user_id=1, address="10.0.0.1")
    with pytest.raises(RateLimited) as refused:
        rate_limit(action="test", user_id=1, address="10.0.0.1")
    assert refused.value.status == 429 and refused.value.code == "rate_limited"
    assert refused.value.retry_after == 1  # the user's window is a second
    rate_limit(action="test", user_id=2, address="10.0.0.1")  # another user from the same address


def test_an_address_over_its_limit_is_refused_whoever_asks(limits):
    for user in range(5):
        rate_limit(action="test", user_id=user, address="10.0.0.2")
    with pytest.raises(RateLimited) as refused:
        rate_limit(action="test", user_id=99, address="10.0.0.2")
    assert 1 < refused.value.retry_after <= 60  # the address's window is a minute
    rate_limit(action="test", user_id=99, address="10.0.0.3")


def test_switched_off_nothing_is_counted(limits, settings):
    settings.RATE_LIMITS_ENABLED = False
    for _ in range(10):
        rate_limit(action="test", user_id=1, address="10.0.0.4")
    assert not list(limits.scan_iter(match="rate:test:*"))


def test_an_action_without_limits_counts_nothing(limits):
    for _ in range(10):
        rate_limit(action="unknown", user_id=1, address="10.0.0.5")


def test_redis_out_of_reach_lets_the_request_through(limits, settings, caplog):
    settings.LOCK_REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens there
    for _ in range(5):
        rate_limit(action="test", user_id=1, address="10.0.0.6")
    assert "rate limits not counted" in caplog.text


@pytest.mark.django_db
def test_a_buyer_over_the_limit_hears_429_through_the_api_and_the_page(limits, settings, api_client, make_voucher):
    from django.test import Client

    from orders.models import Order

    settings.RATE_LIMITS = {"purchase": {"user": (2, 60)}}
    for key in limits.scan_iter(match="rate:purchase:*"):
        limits.delete(key)
    vouchers = [make_voucher(stock=5) for _ in range(3)]
    buyer = api_client()
    assert [buyer.post(f"/api/vouchers/{v.pk}/purchase").status_code for v in vouchers[:2]] == [201, 201]
    refused = buyer.post(f"/api/vouchers/{vouchers[2].pk}/purchase")
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert int(refused["Retry-After"]) >= 1
    assert not Order.objects.filter(voucher=vouchers[2]).exists()
    page = Client()
    page.force_login(buyer.user)
    answer = page.post(f"/vouchers/{vouchers[2].pk}/buy")
    assert b"Too many requests" in answer.content
    assert not Order.objects.filter(voucher=vouchers[2]).exists()
    for key in limits.scan_iter(match="rate:purchase:*"):
        limits.delete(key)
