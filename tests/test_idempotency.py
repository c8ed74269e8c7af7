"""Idempotency keys on the purchase and the draw (docs/api.md, "Idempotency keys"): a retry
with the same key answers what the first answered and takes nothing more, also while the
first still runs and from many processes at once; another request under a used key is
refused; keys are the user's own, and kept a bounded time. The pages' buttons send a key
of their own, new with each render, and a post sent twice is answered again. Against the
real database and Redis: takes are counted in the rows written, or in Redis' reservations
under redis_lua."""

from __future__ import annotations

import json
import re
import threading
import time
from html import unescape

import pytest
from django.db import connections
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.urls import reverse

from accounts.services import token_issue
from core.idempotency import (
    KEY_PATTERN,
    idempotency_answered,
    idempotency_claim,
    idempotency_key,
    live_key,
)
from core.namespace import instance_key
from inventory.redis_lua.client import Reservations
from inventory.totals import group_marks
from lottery.models import Draw, Pool
from lottery.selectors import pool_get
from lottery.services import pool_draw
from orders.models import Order, Voucher
from orders.selectors import voucher_get
from orders.services import order_purchase, voucher_update
from payments.models import Payment

from .buyers import act_concurrently
from .http import assert_error, post_json
from .waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]

KEY = "3f1c9a2e-7b4d-4e1a-9c0f-5d6e7f8a9b0c"


@pytest.fixture(autouse=True)
def keys(idempotency_keys):
    return idempotency_keys


def send(client: Client, url: str, key: str = KEY, **kwargs):
    return client.post(url, headers={"Idempotency-Key": key}, **kwargs)


def replayed(response) -> bool:
    return response.get("Idempotent-Replayed") == "true"


class Sale:
    """One product's take under one strategy: its URL, and how many takes a user made."""

    def __init__(self, product: str, strategy: str, make_voucher, make_pool, reservations) -> None:
        self.product, self.strategy, self.reservations = product, strategy, reservations
        if product == "purchase":
            self.item = make_voucher(stock=5, strategy=strategy)
            self.url = f"/api/vouchers/{self.item.pk}/purchase"
        else:
            self.item = make_pool(prizes=(("Gold", 5),), draws_per_user=5, strategy=strategy)
            self.url = f"/api/pools/{self.item.pk}/draw"
        self.group_id = self.item.group_id

    def taken(self, user) -> int:
        """The takes ``user`` made: rows written, or reservations under redis_lua."""
        if self.strategy == "redis_lua":
            return Reservations(self.reservations).takes(group_id=self.group_id, user_id=user.pk)
        records = Order.objects.filter(voucher=self.item) if self.product == "purchase" else self.item.draws
        return records.filter(user=user).count()

    def stock(self) -> int:
        if self.strategy == "redis_lua":
            return sum(Reservations(self.reservations).stock(group_id=self.group_id).values())
        return group_marks(group_id=self.group_id).stock


SALES = [
    ("purchase", "db_atomic", 201),
    ("purchase", "redis_lua", 202),
    ("draw", "db_atomic", 201),
    ("draw", "redis_lua", 202),
]


def claimed_unanswered(url: str, user_id: int, key: str = KEY):
    """A purchase request that claimed ``key`` and has not answered (still running, or its
    process died)."""
    request = RequestFactory().post(url, headers={"Idempotency-Key": key})
    assert idempotency_claim(request, HttpResponse(), action="purchase", user_id=user_id) is None
    return request


@pytest.fixture(params=SALES, ids=[f"{product} {strategy}" for product, strategy, _ in SALES])
def sale(request, make_voucher, make_pool, reservations_redis):
    product, strategy, status = request.param
    made = Sale(product, strategy, make_voucher, make_pool, reservations_redis)
    made.status = status
    return made


def test_a_retry_answers_the_first_answer_and_takes_nothing_more(api_client, sale):
    buyer = api_client()
    first = send(buyer, sale.url)
    assert first.status_code == sale.status, first.content
    assert not replayed(first)
    left = sale.stock()

    again = [send(buyer, sale.url) for _ in range(3)]

    for response in again:
        assert (response.status_code, response.json()) == (first.status_code, first.json())
        assert response["Content-Type"] == first["Content-Type"]
        assert replayed(response)
    assert sale.taken(buyer.user) == 1
    assert sale.stock() == left == 4
    # Without the key, or with a new one, it is a new request: a draw draws again.
    fresh = send(buyer, sale.url, key="another-attempt")
    assert not replayed(fresh)
    assert fresh.status_code == (409 if sale.product == "purchase" else sale.status)


def test_without_the_header_nothing_is_asked_of_redis_for_it(api_client, sale, keys):
    buyer = api_client()
    assert buyer.post(sale.url).status_code == sale.status
    assert buyer.post(sale.url).status_code == (409 if sale.product == "purchase" else sale.status)
    assert not list(keys.scan_iter(match=instance_key("idem:*")))


@pytest.mark.parametrize("strategy", ["db_atomic", "redis_lua"])
def test_a_sold_out_refusal_is_kept_and_replayed(api_client, make_voucher, strategy):
    voucher = make_voucher(stock=1, strategy=strategy)
    url = f"/api/vouchers/{voucher.pk}/purchase"
    assert api_client().post(url).status_code in (201, 202)
    buyer = api_client()
    refused = send(buyer, url)
    assert_error(refused, 409, "sold_out")

    voucher_update(voucher=voucher, restock=1)
    again = send(buyer, url)

    assert_error(again, 409, "sold_out")
    assert again.json() == refused.json() and replayed(again)
    assert send(buyer, url, key="after-the-restock").status_code in (201, 202)  # a new attempt


def test_a_key_used_for_another_item_or_body_is_refused(api_client, make_voucher, make_pool):
    voucher, other = make_voucher(), make_voucher()
    pool = make_pool()
    buyer = api_client()
    assert send(buyer, f"/api/vouchers/{voucher.pk}/purchase").status_code == 201

    assert_error(send(buyer, f"/api/vouchers/{other.pk}/purchase"), 422, "idempotency_key_reused")
    reused_with_a_body = post_json(buyer, f"/api/vouchers/{voucher.pk}/purchase", {}, headers={"Idempotency-Key": KEY})
    assert_error(reused_with_a_body, 422, "idempotency_key_reused")

    assert not Order.objects.filter(voucher=other).exists()
    assert Order.objects.filter(user=buyer.user).count() == 1
    # A draw's keys are not a purchase's.
    assert send(buyer, f"/api/pools/{pool.pk}/draw").status_code == 201


def test_the_same_key_from_another_user_is_another_key(api_client, make_voucher):
    voucher = make_voucher()
    url = f"/api/vouchers/{voucher.pk}/purchase"
    answers = [send(api_client(), url) for _ in range(2)]
    assert [response.status_code for response in answers] == [201, 201]
    assert not any(replayed(response) for response in answers)
    assert len({response.json()["order_id"] for response in answers}) == 2
    assert Order.objects.filter(voucher=voucher).count() == 2


@pytest.mark.parametrize("key", ["", "two words", "tab\tin", "x" * 256, "caf\u00e9", "line\nbreak"])
def test_a_malformed_key_is_refused_and_does_nothing(api_client, make_voucher, key, keys):
    voucher = make_voucher()
    refused = send(api_client(), f"/api/vouchers/{voucher.pk}/purchase", key=key)
    assert_error(refused, 422, "invalid")
    assert "Idempotency-Key" in refused.json()["message"]
    assert not Order.objects.exists()
    assert not list(keys.scan_iter(match=instance_key("idem:*")))


def test_the_longest_key_and_every_visible_character_are_taken(api_client, make_voucher):
    voucher = make_voucher()
    visible = "".join(chr(code) for code in range(0x21, 0x7F))
    assert send(api_client(), f"/api/vouchers/{voucher.pk}/purchase", key="k" * 255).status_code == 201
    assert send(api_client(), f"/api/vouchers/{voucher.pk}/purchase", key=visible).status_code == 201


def test_a_request_refused_before_it_starts_claims_no_key(api_client, keys):
    buyer = api_client()
    assert_error(send(buyer, "/api/vouchers/999999/purchase"), 404, "not_found")
    assert_error(send(Client(), "/api/vouchers/999999/purchase"), 401, "unauthorized")
    assert not list(keys.scan_iter(match=instance_key("idem:*")))


@pytest.mark.race
@pytest.mark.parametrize(
    ("product", "strategy"), [("purchase", "db_atomic"), ("draw", "redis_lua")], ids=["purchase", "draw"]
)
def test_the_same_key_from_many_processes_at_once_takes_once_and_answers_alike(
    make_user, make_voucher, make_pool, reservations_redis, settings, product, strategy
):
    settings.IDEMPOTENCY_WAIT_SECONDS = 30  # on a busy machine too: every retry waits for the first
    settings.IDEMPOTENCY_WAITERS = 12  # all of them (past the bound, told at once: a test of its own)
    sale = Sale(product, strategy, make_voucher, make_pool, reservations_redis)
    user = make_user()
    token = token_issue(user=user)

    def fire(_slot) -> tuple[int, dict, bool]:
        client = Client(headers={"Authorization": f"Bearer {token}", "Idempotency-Key": KEY})
        response = client.post(sale.url)
        return response.status_code, response.json(), replayed(response)

    # 4 processes x 3 threads, released together; the first holds its take 100 ms.
    outcome = act_concurrently(act=fire, plan=[[0, 1, 2]] * 4, race_ms=100)

    assert not outcome.unexpected, outcome.unexpected
    answers = {(status, json.dumps(body, sort_keys=True)) for status, body, _ in outcome.confirmed}
    assert len(answers) == 1, answers
    [(status, _)] = answers
    assert status == (201 if strategy == "db_atomic" else 202)
    assert sorted(again for _, _, again in outcome.confirmed) == [False] + [True] * 11
    assert sale.taken(user) == 1


def test_a_retry_while_the_first_runs_waits_for_its_answer_or_is_told_to_come_back(
    api_client, make_voucher, settings, keys
):
    settings.RACE_WINDOW_MS = 1500  # the first request's take pauses inside its transaction
    voucher = make_voucher(stock=5)
    url = f"/api/vouchers/{voucher.pk}/purchase"
    buyer = api_client()
    first: dict = {}

    def run_first():
        try:
            first["response"] = send(buyer, url)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run_first)
    thread.start()
    try:
        key = idempotency_key(user_id=buyer.user.pk, action="purchase", key=KEY)
        wait_until(lambda: keys.exists(key), "the first request holds its key")

        settings.IDEMPOTENCY_WAIT_SECONDS = 0.05
        told = send(api_client(buyer.user), url)
        assert_error(told, 409, "idempotency_in_progress")
        assert told["Retry-After"] == "1"

        settings.IDEMPOTENCY_WAIT_SECONDS = 30
        waited = send(api_client(buyer.user), url)
    finally:
        thread.join()
    assert first["response"].status_code == 201 and not replayed(first["response"])
    assert (waited.status_code, waited.json()) == (201, first["response"].json())
    assert replayed(waited)
    assert Order.objects.filter(voucher=voucher).count() == 1


def test_past_the_waiters_a_retry_of_a_running_request_is_told_at_once(api_client, make_voucher, settings, keys):
    """Copies of one request, sent at once, each held a server worker while they waited for the
    first, and no rate limit counted them: past ``IDEMPOTENCY_WAITERS`` they are told at once."""
    settings.IDEMPOTENCY_WAITERS = 1
    settings.IDEMPOTENCY_WAIT_SECONDS = 30
    voucher = make_voucher()
    url = f"/api/vouchers/{voucher.pk}/purchase"
    buyer = api_client()
    first = claimed_unanswered(url, buyer.user.pk)  # the first request, still running
    waiters = idempotency_key(user_id=buyer.user.pk, action="purchase", key=KEY) + ":waiters"
    waited: dict = {}

    def wait_for_the_first():
        try:
            waited["response"] = send(api_client(buyer.user), url)
        finally:
            connections.close_all()

    thread = threading.Thread(target=wait_for_the_first)
    thread.start()
    try:
        wait_until(lambda: keys.get(waiters) == b"1", "the retry waits")
        assert_error(send(api_client(buyer.user), url), 409, "idempotency_in_progress")  # one too many: at once
        answer = HttpResponse(b'{"order_id": 7}', status=201, content_type="application/json")
        idempotency_answered(first, answer)
    finally:
        thread.join()
    assert (waited["response"].status_code, waited["response"].json()) == (201, {"order_id": 7})
    assert keys.get(waiters) == b"0"  # left as it ended


def test_a_refusal_is_kept_for_the_retries_not_for_a_day(api_client, make_voucher, settings, keys):
    settings.IDEMPOTENCY_REFUSAL_SECONDS = 600
    voucher, empty = make_voucher(stock=1), make_voucher(stock=0)
    buyer = api_client()
    bought = send(buyer, f"/api/vouchers/{voucher.pk}/purchase", key="bought-1")
    assert bought.status_code == 201
    refused = send(buyer, f"/api/vouchers/{empty.pk}/purchase", key="refused-1")
    assert_error(refused, 409, "sold_out")
    assert_error(send(buyer, f"/api/vouchers/{empty.pk}/purchase", key="refused-1"), 409, "sold_out")  # replayed

    def ttl(key: str) -> int:
        return keys.pttl(idempotency_key(user_id=buyer.user.pk, action="purchase", key=key))

    assert 23 * 3600_000 < ttl("bought-1") <= 24 * 3600_000
    assert 0 < ttl("refused-1") <= 600_000
    live = keys.pttl(live_key(user_id=buyer.user.pk))
    assert live > 23 * 3600_000  # the user's count lives as long as its longest record, not its last


def test_a_pages_refusal_that_did_its_thing_is_kept_the_keys_lifetime(api_client, settings, keys):
    """A page answers in words, its refusal beside it: one that did nothing is kept for the
    retries alone, but ``unconfirmed`` made its reservation, and a resend after ten minutes
    must not make it twice."""
    from inventory.errors import SoldOut, Unconfirmed

    settings.IDEMPOTENCY_REFUSAL_SECONDS = 600
    buyer = api_client()
    kept = {}
    for name, refusal in (("sold-out", SoldOut()), ("unconfirmed", Unconfirmed(7))):
        request = claimed_unanswered("/vouchers/1/buy", buyer.user.pk, key=name)
        idempotency_answered(request, HttpResponse(b"<p>words</p>"), refusal=refusal)
        kept[name] = keys.pttl(idempotency_key(user_id=buyer.user.pk, action="purchase", key=name))
    assert 0 < kept["sold-out"] <= 600_000
    assert kept["unconfirmed"] > 23 * 3600_000


def test_a_first_request_that_never_answered_leaves_its_key_interrupted_and_a_retry_draws_nothing(
    api_client, make_pool, settings, keys
):
    settings.IDEMPOTENCY_RUNNING_SECONDS = 0.3
    settings.IDEMPOTENCY_WAIT_SECONDS = 0
    pool = make_pool(prizes=(("Gold", 5),), draws_per_user=3)
    url = f"/api/pools/{pool.pk}/draw"
    buyer = api_client()
    # A draw whose process died after its commit, before its answer was kept: it claimed
    # the key, drew, and never answered.
    request = RequestFactory().post(url, headers={"Idempotency-Key": KEY})
    assert idempotency_claim(request, HttpResponse(), action="draw", user_id=buyer.user.pk) is None
    pool_draw(user=buyer.user, pool=pool_get(pool_id=pool.pk))

    assert_error(send(buyer, url), 409, "idempotency_in_progress")  # it may still be running
    wait_until(lambda: send(buyer, url).json().get("code") == "idempotency_interrupted", "the first is taken for dead")

    # Ran afresh, the retry drew a second time; it draws nothing, however often it comes.
    assert_error(send(buyer, url), 409, "idempotency_interrupted")
    assert Draw.objects.filter(pool=pool, user=buyer.user).count() == 1
    # Kept as an answer is, not let go with the first request's time.
    assert keys.pttl(idempotency_key(user_id=buyer.user.pk, action="draw", key=KEY)) > 23 * 3600_000
    # A new key is a new attempt.
    assert send(buyer, url, key="after-looking").status_code == 201
    assert Draw.objects.filter(pool=pool, user=buyer.user).count() == 2


def test_a_server_whose_clock_runs_an_hour_ahead_still_waits_on_a_first_request_running(
    api_client, make_voucher, settings, monkeypatch
):
    """The first request's time is counted by Redis' clock, not by whichever server reads it."""
    settings.IDEMPOTENCY_WAIT_SECONDS = 0
    voucher = make_voucher()
    url = f"/api/vouchers/{voucher.pk}/purchase"
    buyer = api_client()
    claimed_unanswered(url, buyer.user.pk)
    now = time.time
    monkeypatch.setattr(time, "time", lambda: now() + 3600)

    assert_error(send(buyer, url), 409, "idempotency_in_progress")


def test_a_slow_first_request_past_its_time_still_keeps_its_answer(api_client, make_voucher, settings, keys):
    settings.IDEMPOTENCY_RUNNING_SECONDS = 0.3
    settings.IDEMPOTENCY_WAIT_SECONDS = 0
    voucher = make_voucher()
    url = f"/api/vouchers/{voucher.pk}/purchase"
    buyer = api_client()
    request = claimed_unanswered(url, buyer.user.pk)
    wait_until(lambda: send(buyer, url).json().get("code") == "idempotency_interrupted", "the first is taken for dead")

    # It was alive after all, and answers: its answer is kept, and the retries hear it.
    order_purchase(user=buyer.user, voucher=voucher_get(voucher_id=voucher.pk))
    idempotency_answered(request, HttpResponse(b'{"status": "confirmed"}', status=201, content_type="application/json"))
    again = send(buyer, url)
    assert (again.status_code, again.json(), replayed(again)) == (201, {"status": "confirmed"}, True)


def test_an_answer_is_kept_for_the_keys_lifetime_then_forgotten(api_client, make_voucher, settings, keys):
    voucher = make_voucher()
    url = f"/api/vouchers/{voucher.pk}/purchase"
    buyer = api_client()
    assert send(buyer, url).status_code == 201
    day = 24 * 3600 * 1000
    assert day - 60_000 < keys.pttl(idempotency_key(user_id=buyer.user.pk, action="purchase", key=KEY)) <= day

    settings.IDEMPOTENCY_KEY_SECONDS = 0.3
    short = "short-lived"
    other = make_voucher()
    first = send(buyer, f"/api/vouchers/{other.pk}/purchase", key=short)
    assert first.status_code == 201
    key = idempotency_key(user_id=buyer.user.pk, action="purchase", key=short)
    assert 0 < keys.pttl(key) <= 300
    wait_until(lambda: not keys.exists(key), "the kept answer lapses")

    # Forgotten: the same key runs as a new request, and the purchase's own rule answers.
    assert_error(send(buyer, f"/api/vouchers/{other.pk}/purchase", key=short), 409, "already_purchased")
    assert Order.objects.filter(user=buyer.user).count() == 2


def test_an_answer_that_asks_for_the_request_again_is_not_kept(api_client, make_voucher, settings, keys):
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"purchase": {"user": (1, 60)}}
    voucher, other = make_voucher(), make_voucher()
    buyer = api_client()
    assert send(buyer, f"/api/vouchers/{voucher.pk}/purchase").status_code == 201
    # A replay does nothing, and counts nothing against the limit.
    assert replayed(send(buyer, f"/api/vouchers/{voucher.pk}/purchase"))

    limited = send(buyer, f"/api/vouchers/{voucher.pk}/purchase", key="second")
    assert_error(limited, 429, "rate_limited")
    assert not replayed(limited)
    assert not keys.exists(idempotency_key(user_id=buyer.user.pk, action="purchase", key="second"))

    settings.RATE_LIMITS = {"purchase": {"user": (100, 60)}}
    assert_error(send(buyer, f"/api/vouchers/{voucher.pk}/purchase", key="second"), 409, "already_purchased")
    assert send(buyer, f"/api/vouchers/{other.pk}/purchase", key="third").status_code == 201


def test_with_the_keys_redis_out_of_reach_a_keyed_take_does_nothing(api_client, make_voucher, settings):
    voucher = make_voucher()
    settings.LOCK_REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens there
    refused = send(api_client(), f"/api/vouchers/{voucher.pk}/purchase")
    assert_error(refused, 503, "unavailable")
    assert int(refused["Retry-After"]) >= 1
    assert not Order.objects.exists()


def test_the_document_declares_the_header_and_its_answers():
    document = Client().get("/api/openapi.json").json()
    for path in ("/api/vouchers/{voucher_id}/purchase", "/api/pools/{pool_id}/draw"):
        operation = document["paths"][path]["post"]
        [header] = [p for p in operation["parameters"] if p["in"] == "header" and p["name"] != "Admission-Ticket"]
        assert (header["name"], header["required"]) == ("Idempotency-Key", False)
        assert header["schema"]["maxLength"] == 255
        assert {"409", "422"} <= set(operation["responses"])
        assert "Idempotent-Replayed" in operation["responses"]["201"]["headers"]
        assert operation["responses"]["409"]["headers"]["Retry-After"]["required"] is False


@pytest.mark.parametrize(
    ("status", "code", "kept"),
    [
        (201, None, True),
        (403, "ended", True),
        (409, "sold_out", True),
        (500, "server_error", True),  # nobody knows what was written: never run again
        (409, "busy", False),
        (409, "pending", False),  # a cancel or a claim of a record not written yet
        (429, "rate_limited", False),
        (503, "unavailable", False),
        (503, "unconfirmed", True),  # a reservation made: never made again
    ],
)
def test_answers_that_end_the_request_are_kept_and_those_asking_for_it_again_let_the_key_go(
    make_user, keys, status, code, kept
):
    user = make_user()
    request = RequestFactory().post("/api/vouchers/1/purchase", headers={"Idempotency-Key": KEY})
    assert idempotency_claim(request, HttpResponse(), action="purchase", user_id=user.pk) is None
    body = {"order_id": 1, "status": "confirmed"} if code is None else {"code": code, "message": "."}
    answer = HttpResponse(json.dumps(body), status=status, content_type="application/json")

    idempotency_answered(request, answer)

    key = idempotency_key(user_id=user.pk, action="purchase", key=KEY)
    assert keys.exists(key) == kept
    again = RequestFactory().post("/api/vouchers/1/purchase", headers={"Idempotency-Key": KEY})
    replay = idempotency_claim(again, HttpResponse(), action="purchase", user_id=user.pk)
    if kept:
        assert (replay.status_code, json.loads(replay.content)) == (status, body)
        assert replay["Idempotent-Replayed"] == "true"
        print(f"\n{status} kept in {keys.memory_usage(key)} bytes of Redis")
    else:
        assert replay is None  # the retry holds the key now, and runs


# -- the pages' buttons ------------------------------------------------------------------------------


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def button_key(html: str, testid: str) -> str:
    """The Idempotency-Key the button ``testid`` of a rendered page sends (its ``hx-headers``)."""
    tag = re.search(rf'<button [^>]*data-testid="{testid}"[^>]*>', html)
    assert tag, html
    headers = re.search(r"hx-headers='([^']*)'", tag.group())
    assert headers, tag.group()
    return json.loads(unescape(headers.group(1)))["Idempotency-Key"]


def test_each_render_of_a_button_sends_a_key_of_its_own(make_user, make_voucher, make_pool):
    voucher, pool = make_voucher(), make_pool()
    client = logged_in(make_user())
    live, standing = reverse("pages:voucher_live", args=[voucher.pk]), reverse("lottery:pool_standing", args=[pool.pk])
    buys = {button_key(client.get(live).content.decode(), "buy") for _ in range(3)}
    draws = {button_key(client.get(standing).content.decode(), "draw") for _ in range(3)}
    assert len(buys) == len(draws) == 3
    assert all(re.fullmatch(KEY_PATTERN, key) for key in buys | draws)


def test_a_buy_posted_twice_with_its_key_is_answered_again_and_bought_once(make_user, make_voucher, keys):
    voucher = make_voucher(stock=5)
    client = logged_in(make_user())
    url = reverse("pages:voucher_buy", args=[voucher.pk])

    first, again = send(client, url), send(client, url)

    assert 'data-outcome="bought"' in first.content.decode()
    # Not "You already bought this voucher": the first answer, again, and the page reloads.
    assert (again.status_code, again.content) == (first.status_code, first.content)
    assert replayed(again) and not replayed(first)
    assert again["HX-Trigger"] == first["HX-Trigger"] == "bought"
    assert Order.objects.filter(voucher=voucher).count() == 1
    # A new render's key is a new request, refused in its own words.
    assert 'data-outcome="already_purchased"' in send(client, url, key="next").content.decode()


def test_a_draw_posted_twice_with_its_key_draws_once(make_user, make_pool):
    pool = make_pool(prizes=(("Gold", 5),), draws_per_user=3)
    user = make_user()
    client = logged_in(user)
    url = reverse("lottery:pool_draw", args=[pool.pk])

    first, again = send(client, url), send(client, url)

    assert 'data-outcome="won"' in first.content.decode()
    assert again.content == first.content and replayed(again)
    assert Draw.objects.filter(pool=pool, user=user).count() == 1


@pytest.mark.usefixtures("payment_provider")
@pytest.mark.parametrize("action", ["pay", "cancel", "claim"])
def test_a_held_records_button_posted_twice_with_its_key_changes_it_once(make_user, make_voucher, make_pool, action):
    user = make_user()
    client = logged_in(user)
    if action == "claim":
        pool = make_pool(prizes=(("Gold", 5),))
        Pool.objects.filter(pk=pool.pk).update(hold_seconds=600)
        record = pool_draw(user=user, pool=pool_get(pool_id=pool.pk))
        url, done = reverse("lottery:draw_claim", args=[record.public_id]), "claimed"
    else:
        voucher = make_voucher()
        Voucher.objects.filter(pk=voucher.pk).update(hold_seconds=600)
        record = order_purchase(user=user, voucher=voucher_get(voucher_id=voucher.pk))
        url = reverse("payments:order_pay" if action == "pay" else "pages:order_cancel", args=[record.public_id])
        done = "paid" if action == "pay" else "cancelled"

    first, again = send(client, url), send(client, url)

    # Not "already paid" (claimed, cancelled): the first answer, again.
    assert f'data-outcome="{done}"' in first.content.decode() and "data-refusal" not in first.content.decode()
    assert again.content == first.content and replayed(again)
    record.refresh_from_db()
    assert record.status == done
    if action == "pay":
        assert Payment.objects.filter(order=record).count() == 1


def test_a_page_refusal_that_asks_for_the_request_again_is_not_kept(make_user, make_voucher, settings, keys):
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"purchase": {"user": (1, 60)}}
    voucher = make_voucher()
    user = make_user()
    client = logged_in(user)
    url = reverse("pages:voucher_buy", args=[voucher.pk])
    assert 'data-outcome="bought"' in send(client, url).content.decode()
    assert replayed(send(client, url))  # counts nothing against the limit

    limited = send(client, url, key="second")

    assert 'data-outcome="rate_limited"' in limited.content.decode()
    assert not keys.exists(idempotency_key(user_id=user.pk, action="purchase", key="second"))
    settings.RATE_LIMITS = {"purchase": {"user": (100, 60)}}
    retried = send(client, url, key="second")
    assert 'data-outcome="already_purchased"' in retried.content.decode() and not replayed(retried)
