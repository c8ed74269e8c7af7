"""The waiting room through the HTTP API (docs/api.md, "Waiting room"): staff set an item's
admission, rate and ticket lifetime; a buyer joins the queue once, polls it, is admitted with a
ticket and takes with it, once, on every strategy; a take without a good ticket is 403
``not_admitted``. Real MariaDB and Redis."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client

from core.namespace import key_prefix
from core.ratelimit import rate_client
from inventory.strategies import strategy_names
from orders.models import Voucher
from tests.stock import stock_left

from .http import assert_error, patch_json, post_json
from .test_idempotency import keys  # noqa: F401 (autouse: no key or rate counter of an earlier test)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("rooms", "reservations_redis", "redlock_urls"),
]

KEY = "0b7a0e52-3b57-4f0e-9f6e-5b8c1d2e3f40"


@pytest.fixture
def staff(api_client):
    return api_client(staff=True)


def queued_voucher(make_voucher, *, strategy: str = "db_atomic", stock: int = 3, **fields) -> Voucher:
    return make_voucher(stock=stock, strategy=strategy, admission="queue", admission_rate=1000.0, **fields)


def admitted(client: Client, path: str) -> str:
    """Join the queue at ``path`` and poll it until admitted: the ticket."""
    joined = client.post(path)
    assert joined.status_code == 200, joined.content
    assert joined.json()["status"] in ("waiting", "admitted")
    for _ in range(50):
        polled = client.get(path).json()
        if polled["status"] == "admitted":
            return polled["ticket"]
    raise AssertionError(f"not admitted: {polled}")


def test_staff_set_a_waiting_room_and_every_read_says_it(staff, make_voucher, make_pool):
    made = post_json(
        staff,
        "/api/admin/vouchers",
        {
            "title": "Door buster",
            "stock": 5,
            "begin_at": "2030-01-01T10:00:00Z",
            "end_at": "2030-01-01T11:00:00Z",
            "admission": "queue",
            "admission_rate": 2.5,
            "admission_ticket_seconds": 30,
        },
    )
    assert made.status_code == 201, made.content
    voucher = made.json()
    assert (voucher["admission"], voucher["admission_rate"], voucher["admission_ticket_seconds"]) == ("queue", 2.5, 30)
    assert Client().get(f"/api/vouchers/{voucher['id']}").json()["admission"] == "queue"
    assert {v["id"]: v["admission"] for v in Client().get("/api/vouchers").json()}[voucher["id"]] == "queue"
    changed = patch_json(staff, f"/api/admin/vouchers/{voucher['id']}", {"admission_rate": 50})
    assert (changed.json()["admission"], changed.json()["admission_rate"]) == ("queue", 50.0)
    assert (
        patch_json(staff, f"/api/admin/vouchers/{voucher['id']}", {"admission": "open"}).json()["admission"] == "open"
    )

    pool = make_pool()
    changed = patch_json(staff, f"/api/admin/pools/{pool.pk}", {"admission": "queue", "admission_ticket_seconds": 90})
    assert changed.status_code == 200, changed.content
    assert (changed.json()["admission"], changed.json()["admission_ticket_seconds"]) == ("queue", 90)
    listed = {p["id"]: p for p in Client().get("/api/pools").json()}
    assert listed[pool.pk]["admission"] == "queue"


@pytest.mark.parametrize(
    "change",
    [{"admission": "lottery"}, {"admission_rate": 0}, {"admission_rate": 20_000}, {"admission_ticket_seconds": 4}],
)
def test_a_waiting_room_out_of_bounds_is_refused_with_nothing_changed(staff, make_voucher, change):
    voucher = make_voucher()
    assert_error(patch_json(staff, f"/api/admin/vouchers/{voucher.pk}", change), 422, "invalid")
    voucher.refresh_from_db()
    assert (voucher.admission, voucher.admission_rate, voucher.admission_ticket_seconds) == ("open", 10.0, 60)


@pytest.mark.parametrize("strategy", strategy_names())
def test_a_take_needs_the_buyers_own_ticket_once_on_every_strategy(strategy, api_client, make_voucher):
    voucher = queued_voucher(make_voucher, strategy=strategy)
    buyer, other = api_client(), api_client()
    purchase = f"/api/vouchers/{voucher.pk}/purchase"
    queue = f"/api/vouchers/{voucher.pk}/queue"
    assert_error(buyer.post(purchase), 403, "not_admitted")
    ticket = admitted(buyer, queue)
    assert_error(other.post(purchase, headers={"Admission-Ticket": ticket}), 403, "not_admitted")
    assert_error(buyer.post(purchase, headers={"Admission-Ticket": ticket + "0"}), 403, "not_admitted")
    taken = buyer.post(purchase, headers={"Admission-Ticket": ticket})
    assert taken.status_code == (202 if strategy == "redis_lua" else 201), taken.content
    assert_error(buyer.post(purchase, headers={"Admission-Ticket": ticket}), 403, "not_admitted")
    assert_error(buyer.get(queue), 404, "not_queued")
    if strategy != "redis_lua":
        assert stock_left(voucher) == 2


@pytest.mark.parametrize("strategy", ["db_atomic", "redis_lua"])
@pytest.mark.parametrize("refused", ["spent", "none", "forged"])
def test_a_take_refused_for_its_ticket_counts_against_the_rate_limits(
    strategy, refused, api_client, make_voucher, settings
):
    """A spent ticket sent again, none, or one this server never gave: each refusal counts, so
    a client cannot send such takes without limit."""
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"purchase": {"user": (3, 60)}}
    voucher = queued_voucher(make_voucher, strategy=strategy)
    buyer = api_client()
    purchase = f"/api/vouchers/{voucher.pk}/purchase"
    ticket = admitted(buyer, f"/api/vouchers/{voucher.pk}/queue")
    assert buyer.post(purchase, headers={"Admission-Ticket": ticket}).status_code in (201, 202)
    sent = {"spent": {"Admission-Ticket": ticket}, "none": {}, "forged": {"Admission-Ticket": ticket[:-1] + "0"}}
    for _ in range(2):
        assert_error(buyer.post(purchase, headers=sent[refused]), 403, "not_admitted")
    assert_error(buyer.post(purchase, headers=sent[refused]), 429, "rate_limited")


def test_joins_and_polls_count_against_the_rate_limits_per_user_and_per_address(api_client, make_voucher, settings):
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"queue": {"user": (3, 60), "address": (5, 60)}}
    voucher = make_voucher(stock=3, admission="queue", admission_rate=0.1, starts_in=-timedelta(milliseconds=1))
    buyer, other = api_client(), api_client()
    queue = f"/api/vouchers/{voucher.pk}/queue"
    assert buyer.post(queue).status_code == 200
    # The room's first move set its keys to go with the sale, days away: its counters keep
    # their own minute (counting on till the sale's end, the caller would be locked out).
    counters = rate_client().keys(f"{key_prefix()}rate:*:queue:*")
    assert counters and all(0 < rate_client().pttl(key) <= 60_000 for key in counters)
    assert [buyer.get(queue).status_code, buyer.get(queue).status_code] == [200] * 2
    limited = buyer.get(queue)
    assert_error(limited, 429, "rate_limited")
    assert int(limited["Retry-After"]) >= 1
    # Another user from the same address: within their own limit, over the address's at its sixth.
    assert other.post(queue).status_code == 200
    assert_error(other.get(queue), 429, "rate_limited")
    # An open item's join moves no room, and counts nothing.
    open_queue = f"/api/vouchers/{make_voucher().pk}/queue"
    assert [buyer.post(open_queue).json()["status"] for _ in range(4)] == ["admitted"] * 4


def test_a_draw_needs_a_ticket_for_each_draw(api_client, make_pool):
    pool = make_pool(admission="queue", admission_rate=1000.0, draws_per_user=2)
    drawer = api_client()
    draw, queue = f"/api/pools/{pool.pk}/draw", f"/api/pools/{pool.pk}/queue"
    assert_error(drawer.post(draw), 403, "not_admitted")
    for _ in range(2):
        ticket = admitted(drawer, queue)
        assert drawer.post(draw, headers={"Admission-Ticket": ticket}).status_code == 201
        assert_error(drawer.post(draw, headers={"Admission-Ticket": ticket}), 403, "not_admitted")


def test_a_retry_under_its_key_answers_again_without_a_ticket_and_a_refusal_lets_the_key_go(api_client, make_voucher):
    voucher = queued_voucher(make_voucher)
    buyer = api_client()
    purchase, queue = f"/api/vouchers/{voucher.pk}/purchase", f"/api/vouchers/{voucher.pk}/queue"
    assert_error(buyer.post(purchase, headers={"Idempotency-Key": KEY}), 403, "not_admitted")
    ticket = admitted(buyer, queue)
    first = buyer.post(purchase, headers={"Idempotency-Key": KEY, "Admission-Ticket": ticket})
    assert first.status_code == 201, first.content
    again = buyer.post(purchase, headers={"Idempotency-Key": KEY})
    assert (again.status_code, again.json()) == (201, first.json())
    assert again["Idempotent-Replayed"] == "true"


def test_joining_is_idempotent_and_polling_before_joining_is_404(api_client, make_voucher):
    # Open since a moment: at 0.1 a second, nobody is admitted during the test.
    voucher = make_voucher(stock=3, admission="queue", admission_rate=0.1, starts_in=-timedelta(milliseconds=1))
    earliest, buyer, other = api_client(), api_client(), api_client()
    queue = f"/api/vouchers/{voucher.pk}/queue"
    assert_error(buyer.get(queue), 404, "not_queued")
    # The first to join a room nobody waits in is admitted by the join; the next wait their turn.
    alone = earliest.post(queue).json()
    assert (alone["status"], alone["position"], alone["poll_after_seconds"]) == ("admitted", None, None)
    assert alone["ticket"] and earliest.post(queue).json()["ticket"] == alone["ticket"]
    first = buyer.post(queue).json()
    assert (first["status"], first["position"], first["ahead"], first["ticket"]) == ("waiting", 1, 0, None)
    assert other.post(queue).json()["position"] == 2
    assert buyer.post(queue).json()["position"] == 1
    polled = other.get(queue).json()
    # A long wait: asked to poll again at the longest interval, not every second.
    assert polled["eta_seconds"] >= 10 and polled["poll_after_seconds"] == 5


def test_a_ticket_header_longer_than_any_ticket_is_refused_422_with_nothing_taken(api_client, make_voucher):
    voucher = make_voucher(stock=3)
    taken = api_client().post(f"/api/vouchers/{voucher.pk}/purchase", headers={"Admission-Ticket": "x" * 201})
    assert_error(taken, 422, "invalid")
    assert stock_left(voucher) == 3


def test_a_ticket_signed_with_characters_no_signature_has_is_refused_403_with_nothing_taken(api_client, make_voucher):
    voucher = queued_voucher(make_voucher)
    buyer = api_client()
    ticket = admitted(buyer, f"/api/vouchers/{voucher.pk}/queue")
    forged = ticket.rpartition(".")[0] + ".\u00e9" + "0" * 31
    assert_error(buyer.post(f"/api/vouchers/{voucher.pk}/purchase", HTTP_ADMISSION_TICKET=forged), 403, "not_admitted")
    assert stock_left(voucher) == 3


def test_an_open_item_answers_admitted_without_a_ticket(api_client, make_voucher):
    voucher = make_voucher()
    buyer = api_client()
    standing = buyer.post(f"/api/vouchers/{voucher.pk}/queue").json()
    assert (standing["status"], standing["ticket"], standing["poll_after_seconds"]) == ("admitted", None, None)
    assert buyer.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 201


def test_an_unlisted_items_queue_is_not_there_for_the_public(api_client, make_voucher):
    voucher = queued_voucher(make_voucher, listed=False)
    assert_error(api_client().post(f"/api/vouchers/{voucher.pk}/queue"), 404, "not_found")


def test_the_document_declares_the_queue_and_the_ticket_header():
    document = Client().get("/api/openapi.json").json()
    for path in ("/api/vouchers/{voucher_id}/queue", "/api/pools/{pool_id}/queue"):
        assert {"get", "post"} <= set(document["paths"][path])
        assert "404" in document["paths"][path]["get"]["responses"]
    for path, method in (("/api/vouchers/{voucher_id}/purchase", "post"), ("/api/pools/{pool_id}/draw", "post")):
        names = [parameter["name"] for parameter in document["paths"][path][method]["parameters"]]
        assert "Admission-Ticket" in names
        assert "403" in document["paths"][path][method]["responses"]
