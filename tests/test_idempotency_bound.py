"""What one user keeps under Idempotency-Keys is bounded, whatever the calls: past
IDEMPOTENCY_KEYS_PER_USER live records a new key is 429 idempotency_keys_exhausted, nothing
done, while replays, requests without a key and other users go on; a key let go frees its
place at once, a lapsed one when it lapses; and the bound holds for many processes claiming
at once. Against the real database and Redis."""

from __future__ import annotations

import json
from uuid import uuid4

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from core.idempotency import idempotency_answered, idempotency_claim, live_key
from core.namespace import instance_key
from orders.models import Order

from .buyers import act_concurrently
from .http import assert_error
from .waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def keys(idempotency_keys):
    return idempotency_keys


def send(client, url: str, key: str | None = None):
    return client.post(url, headers={} if key is None else {"Idempotency-Key": key})


def records(client, user_id: int) -> int:
    """The user's records under keys, their count of live ones aside (a test may scan)."""
    return sum(
        1 for key in client.scan_iter(match=instance_key(f"idem:{{user:{user_id}}}:*")) if not key.endswith(b":live")
    )


def test_a_new_key_past_the_bound_is_refused_whatever_the_call_and_nothing_is_done(
    api_client, make_voucher, make_pool, settings, keys
):
    settings.IDEMPOTENCY_KEYS_PER_USER = 3
    buyer, other = api_client(), api_client()
    voucher, pool = make_voucher(stock=5), make_pool()
    first = send(buyer, f"/api/vouchers/{voucher.pk}/purchase", "k1")
    assert first.status_code == 201
    order_id = first.json()["order_id"]
    assert send(buyer, f"/api/orders/{order_id}/pay", "k2").status_code == 409  # paid when made: kept
    assert send(buyer, f"/api/pools/{pool.pk}/draw", "k3").status_code == 201

    refused = send(buyer, f"/api/orders/{order_id}/cancel", "k4")

    assert_error(refused, 429, "idempotency_keys_exhausted")
    # When the first kept answer lapses: the pay's refusal, kept IDEMPOTENCY_REFUSAL_SECONDS.
    assert (
        settings.IDEMPOTENCY_REFUSAL_SECONDS - 60 < int(refused["Retry-After"]) <= settings.IDEMPOTENCY_REFUSAL_SECONDS
    )
    assert Order.objects.get().status == "confirmed"  # the cancel did nothing
    assert (keys.zcard(live_key(user_id=buyer.user.pk)), records(keys, buyer.user.pk)) == (3, 3)
    # A replay is no new record; without a key nothing is kept; another user has places of their own.
    assert send(buyer, f"/api/vouchers/{voucher.pk}/purchase", "k1").json() == first.json()
    assert_error(send(buyer, f"/api/vouchers/{voucher.pk}/purchase"), 409, "already_purchased")
    assert send(other, f"/api/vouchers/{voucher.pk}/purchase", "k4").status_code == 201


def test_a_key_let_go_frees_its_place_and_a_lapsed_one_when_it_lapses(api_client, make_voucher, settings, keys):
    settings.IDEMPOTENCY_KEYS_PER_USER = 1
    settings.IDEMPOTENCY_KEY_SECONDS = 1
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"purchase": {"user": (0, 60)}}
    buyer = api_client()
    voucher = make_voucher()
    live = live_key(user_id=buyer.user.pk)
    url = f"/api/vouchers/{voucher.pk}/purchase"

    assert_error(send(buyer, url, "k1"), 429, "rate_limited")
    assert keys.zcard(live) == 0  # an answer that asks again is not kept, and frees its place
    settings.RATE_LIMITS = {}
    assert send(buyer, url, "k2").status_code == 201
    refused = send(buyer, url, "k3")
    assert_error(refused, 429, "idempotency_keys_exhausted")
    assert int(refused["Retry-After"]) == 1

    lapsed = "the kept answer lapsed, and its place with it, so that the same request is answered"
    wait_until(lambda: send(buyer, url, "k3").status_code != 429, lapsed, every=0.05)
    assert_error(send(buyer, url, "k3"), 409, "already_purchased")  # kept this time: replayed
    assert keys.zcard(live) == 1


def test_many_processes_claiming_at_once_never_pass_the_bound(make_user, settings, keys):
    settings.IDEMPOTENCY_KEYS_PER_USER = 5
    user_id = make_user().pk

    def claim(_slot) -> str:
        request = RequestFactory().post("/api/vouchers/1/purchase", HTTP_IDEMPOTENCY_KEY=uuid4().hex)
        assert idempotency_claim(request, HttpResponse(), action="purchase", user_id=user_id) is None
        idempotency_answered(request, HttpResponse(json.dumps({"order_id": 1}), status=201))
        return "kept"

    # 4 processes x 4 threads, 16 fresh keys released together.
    outcome = act_concurrently(act=claim, plan=[[0, 1, 2, 3]] * 4, race_ms=0)

    assert not outcome.errors, outcome.errors
    assert (len(outcome.confirmed), dict(outcome.refusals)) == (5, {"idempotency_keys_exhausted": 11})
    assert (keys.zcard(live_key(user_id=user_id)), records(keys, user_id)) == (5, 5)
