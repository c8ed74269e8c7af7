"""The lifecycle through the HTTP API (docs/api.md, "Holds: pay by, claim by"): staff set a
voucher's payment window and a pool's claim window; a purchase or a won draw is held until
``pay_by`` / ``claim_by``; the buyer cancels, the winner claims, each once, refused 409 in
the record's state's words, keyed as a purchase is; a ``redis_lua`` record is ``pending``
until its worker writes it, then held. The audits (API, ``manage.py audit``, the admin)
count the lifecycle. Real MariaDB and Redis; ``redis_lua`` persisted in this process.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from inventory.holds import hold_settle, holds_expire_due
from inventory.redis_lua.client import reservations_client
from lottery.models import Draw, Pool
from lottery.product import POOL
from orders.models import Order, Voucher
from orders.product import VOUCHER
from tests.records import answered_row, answered_rows
from tests.stock import stock_left, stock_row

from .http import assert_error, patch_json, post_json
from .test_api_answers import assert_documented
from .test_idempotency import keys  # noqa: F401 (autouse: no key or rate counter of an earlier test)
from .test_redis_lua import persist_pool, persist_voucher

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]

# Longer than the horizon of the expiry tasks (HOLD_TASK_HORIZON_SECONDS): no task is sent.
WINDOW = 3600
KEY = "6a0e1c1e-4f7b-4a8e-9d35-1f2b3c4d5e6f"
CANCEL = ("post", "/api/orders/{order_id}/cancel")
CLAIM = ("post", "/api/draws/{draw_id}/claim")
PURCHASE = ("post", "/api/vouchers/{voucher_id}/purchase")
DRAW = ("post", "/api/pools/{pool_id}/draw")


@pytest.fixture(scope="module")
def document():
    return Client().get("/api/openapi.json").json()


@pytest.fixture
def staff(api_client):
    return api_client(staff=True)


def windowed_voucher(staff, make_voucher, *, stock: int = 2, strategy: str = "db_atomic", **voucher) -> Voucher:
    voucher = make_voucher(stock=stock, strategy=strategy, **voucher)
    answer = patch_json(staff, f"/api/admin/vouchers/{voucher.pk}", {"payment_window_seconds": WINDOW})
    assert answer.status_code == 200, answer.content
    return voucher


def windowed_pool(staff, make_pool, *, strategy: str = "db_atomic", **pool) -> Pool:
    made = make_pool(strategy=strategy, **pool)
    answer = patch_json(staff, f"/api/admin/pools/{made.pk}", {"claim_window_seconds": WINDOW})
    assert answer.status_code == 200, answer.content
    return made


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def held_until(answer: str) -> timedelta:
    """How long from now a deadline the API answered lies."""
    return moment(answer) - timezone.now()


def stock_of(voucher: Voucher) -> int:
    return stock_left(voucher)


def later() -> datetime:
    return timezone.now() + timedelta(seconds=WINDOW + 60)


# The windows, set by staff.


def window_body() -> dict:
    begin = timezone.now()
    return {"begin_at": begin.isoformat(), "end_at": (begin + timedelta(hours=1)).isoformat()}


def test_staff_set_a_vouchers_payment_window_and_read_it_back(staff):
    body = {"title": "Held tickets", "stock": 3, "payment_window_seconds": 900, **window_body()}
    created = post_json(staff, "/api/admin/vouchers", body)
    assert created.status_code == 201, created.content
    assert created.json()["payment_window_seconds"] == 900
    voucher_id = created.json()["id"]
    assert Voucher.objects.get(pk=voucher_id).hold_seconds == 900
    for seconds in (0, 86_400):
        changed = patch_json(staff, f"/api/admin/vouchers/{voucher_id}", {"payment_window_seconds": seconds})
        assert changed.json()["payment_window_seconds"] == seconds
        assert Client().get(f"/api/vouchers/{voucher_id}").json()["payment_window_seconds"] == seconds
    assert [one["payment_window_seconds"] for one in Client().get("/api/vouchers").json()] == [86_400]
    unset = post_json(staff, "/api/admin/vouchers", {"title": "Paid when bought", "stock": 1, **window_body()})
    assert unset.json()["payment_window_seconds"] == 0


def test_staff_set_a_pools_claim_window_and_read_it_back(staff):
    body = {"name": "Held prizes", "draws_per_user": 1, "no_prize_weight": 0, "claim_window_seconds": 60}
    created = post_json(staff, "/api/admin/pools", {**body, **window_body()})
    assert created.status_code == 201, created.content
    pool_id = created.json()["id"]
    assert created.json()["claim_window_seconds"] == 60
    changed = patch_json(staff, f"/api/admin/pools/{pool_id}", {"claim_window_seconds": 86_400})
    assert changed.json()["claim_window_seconds"] == 86_400
    assert Client().get(f"/api/pools/{pool_id}").json()["claim_window_seconds"] == 86_400
    assert Pool.objects.get(pk=pool_id).hold_seconds == 86_400


@pytest.mark.parametrize("seconds", [-1, 86_401, "60", 1.5, True, None])
def test_a_window_out_of_bounds_or_not_a_whole_number_is_refused_and_nothing_written(staff, make_pool, seconds):
    voucher = post_json(
        staff, "/api/admin/vouchers", {"title": "Odd", "stock": 1, "payment_window_seconds": seconds, **window_body()}
    )
    assert_error(voucher, 422, "invalid")
    assert "payment_window_seconds" in voucher.json()["message"]
    pool = {"name": "Odd", "draws_per_user": 1, "no_prize_weight": 0, "claim_window_seconds": seconds}
    assert_error(post_json(staff, "/api/admin/pools", {**pool, **window_body()}), 422, "invalid")
    assert not Voucher.objects.exists()
    assert not Pool.objects.exists()
    if seconds is None:
        return  # a PATCH's null leaves the field as it is
    made = make_pool()
    refused = patch_json(staff, f"/api/admin/pools/{made.pk}", {"claim_window_seconds": seconds, "draws_per_user": 7})
    assert_error(refused, 422, "invalid")
    assert Pool.objects.values_list("hold_seconds", "draws_per_user").get(pk=made.pk) == (0, 3)


def test_a_voucher_patch_with_a_bad_window_changes_nothing_else(staff, make_voucher):
    voucher = make_voucher(stock=2)
    refused = patch_json(staff, f"/api/admin/vouchers/{voucher.pk}", {"payment_window_seconds": 86_401, "restock": 5})
    assert_error(refused, 422, "invalid")
    assert (stock_of(voucher), Voucher.objects.get(pk=voucher.pk).hold_seconds) == (2, 0)


# A purchase held, and its cancel.


def test_a_purchase_with_a_payment_window_is_held_until_pay_by(api_client, staff, make_voucher, document):
    voucher = windowed_voucher(staff, make_voucher)
    buyer = api_client()
    answer = buyer.post(f"/api/vouchers/{voucher.pk}/purchase")
    assert answer.status_code == 201
    body = assert_documented(document, PURCHASE, answer)
    assert body["status"] == "held"
    assert timedelta(seconds=WINDOW - 60) < held_until(body["pay_by"]) <= timedelta(seconds=WINDOW)
    order = buyer.get(f"/api/orders/{body['order_id']}").json()
    assert (order["status"], order["pay_by"]) == ("held", body["pay_by"])
    assert [(one["id"], one["pay_by"]) for one in buyer.get("/api/orders").json()] == [
        (body["order_id"], body["pay_by"])
    ]


def test_without_a_window_a_purchase_is_confirmed_and_pay_by_is_null(api_client, make_voucher, document):
    buyer = api_client()
    answer = buyer.post(f"/api/vouchers/{make_voucher().pk}/purchase")
    body = assert_documented(document, PURCHASE, answer)
    assert (body["status"], body["pay_by"]) == ("confirmed", None)
    assert buyer.get(f"/api/orders/{body['order_id']}").json()["pay_by"] is None


def test_the_buyer_cancels_a_held_order_once_and_may_buy_again(api_client, staff, make_voucher, document):
    # No cooldown after a cancel (docs/design.md, "Abandoned holds"): the buyer buys again at once.
    voucher = windowed_voucher(staff, make_voucher, stock=1, abandon_cooldown_seconds=0)
    buyer = api_client()
    order_id = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    assert stock_of(voucher) == 0

    cancelled = buyer.post(f"/api/orders/{order_id}/cancel")

    assert cancelled.status_code == 200
    assert assert_documented(document, CANCEL, cancelled) == {"order_id": order_id, "status": "cancelled"}
    assert stock_of(voucher) == 1
    assert buyer.get(f"/api/orders/{order_id}").json()["status"] == "cancelled"
    assert_error(buyer.post(f"/api/orders/{order_id}/cancel"), 409, "cancelled")
    assert stock_of(voucher) == 1
    assert buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["status"] == "held"


def test_a_cancel_is_refused_in_the_words_of_the_orders_state(api_client, staff, make_voucher):
    voucher = windowed_voucher(staff, make_voucher, stock=3)
    paying, late, plain = api_client(), api_client(), api_client()
    paid_id = paying.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    hold_settle(VOUCHER, answered_row(Order, paid_id))  # the payment, another app's to make
    assert_error(paying.post(f"/api/orders/{paid_id}/cancel"), 409, "already_paid")

    late_id = late.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    assert holds_expire_due(VOUCHER, item_id=voucher.pk, now=later()) == 1
    assert_error(late.post(f"/api/orders/{late_id}/cancel"), 409, "expired")
    assert late.get(f"/api/orders/{late_id}").json()["status"] == "expired"

    settled_when_made = plain.post(f"/api/vouchers/{make_voucher().pk}/purchase").json()["order_id"]
    assert_error(plain.post(f"/api/orders/{settled_when_made}/cancel"), 409, "already_paid")
    assert stock_of(voucher) == 2  # the expired one's unit, back once


def test_another_users_order_is_not_found_and_stays_held(api_client, staff, make_voucher):
    voucher = windowed_voucher(staff, make_voucher)
    order_id = api_client().post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    assert_error(api_client().post(f"/api/orders/{order_id}/cancel"), 404, "not_found")
    assert_error(api_client().post("/api/orders/424242/cancel"), 404, "not_found")
    assert answered_row(Order, order_id).status == Order.Status.HELD


def test_a_cancel_takes_no_body_and_needs_a_login(api_client, staff, make_voucher):
    voucher = windowed_voucher(staff, make_voucher)
    buyer = api_client()
    order_id = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    assert_error(post_json(buyer, f"/api/orders/{order_id}/cancel", {"reason": "changed my mind"}), 400, "bad_request")
    assert_error(Client().post(f"/api/orders/{order_id}/cancel"), 401, "unauthorized")
    assert answered_row(Order, order_id).status == Order.Status.HELD


# A prize held, and its claim.


def test_a_won_draw_is_held_until_claim_by_and_claimed_once(api_client, staff, make_pool, document):
    pool = windowed_pool(staff, make_pool, prizes=(("Gold", 2),))
    winner = api_client()
    answer = winner.post(f"/api/pools/{pool.pk}/draw")
    body = assert_documented(document, DRAW, answer)
    assert (body["status"], body["prize"]["name"]) == ("held", "Gold")
    assert timedelta(seconds=WINDOW - 60) < held_until(body["claim_by"]) <= timedelta(seconds=WINDOW)
    draw_id = body["draw_id"]
    listed = winner.get(f"/api/draws/{draw_id}").json()
    assert (listed["status"], listed["claim_by"]) == ("held", body["claim_by"])
    assert winner.get("/api/draws").json()[0]["claim_by"] == body["claim_by"]

    claimed = winner.post(f"/api/draws/{draw_id}/claim")

    assert claimed.status_code == 200
    assert assert_documented(document, CLAIM, claimed) == {"draw_id": draw_id, "status": "claimed"}
    assert winner.get(f"/api/draws/{draw_id}").json()["status"] == "claimed"
    assert_error(winner.post(f"/api/draws/{draw_id}/claim"), 409, "already_claimed")
    assert_error(api_client().post(f"/api/draws/{draw_id}/claim"), 404, "not_found")


def test_a_claim_is_refused_for_no_prize_and_after_the_deadline(api_client, staff, make_pool):
    empty = windowed_pool(staff, make_pool, prizes=(("Gold", 1),), no_prize_weight=10**9)
    player = api_client()
    nothing = player.post(f"/api/pools/{empty.pk}/draw").json()
    assert (nothing["prize"], nothing["status"], nothing["claim_by"]) == (None, "confirmed", None)
    assert_error(player.post(f"/api/draws/{nothing['draw_id']}/claim"), 409, "nothing_held")

    pool = windowed_pool(staff, make_pool, prizes=(("Gold", 1),))
    won = player.post(f"/api/pools/{pool.pk}/draw").json()
    assert holds_expire_due(POOL, item_id=pool.pk, now=later()) == 1
    assert_error(player.post(f"/api/draws/{won['draw_id']}/claim"), 409, "forfeited")
    assert player.get(f"/api/draws/{won['draw_id']}").json()["status"] == "forfeited"
    assert Client().get(f"/api/pools/{pool.pk}").json()["prizes"][0]["stock"] == 1  # back in the pool


# Idempotency keys, as for a purchase.


def send(client: Client, url: str, key: str = KEY):
    return client.post(url, headers={"Idempotency-Key": key})


def test_a_cancel_sent_again_with_its_key_answers_the_same_and_cancels_once(api_client, staff, make_voucher):
    voucher = windowed_voucher(staff, make_voucher, stock=2, abandon_cooldown_seconds=0)
    buyer = api_client()
    first_id = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]

    first = send(buyer, f"/api/orders/{first_id}/cancel")
    again = send(buyer, f"/api/orders/{first_id}/cancel")

    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json() == first.json() == {"order_id": first_id, "status": "cancelled"}
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert stock_of(voucher) == 2
    assert answered_row(Order, first_id).releases == 1
    second_id = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    assert_error(send(buyer, f"/api/orders/{second_id}/cancel"), 422, "idempotency_key_reused")
    assert answered_row(Order, second_id).status == Order.Status.HELD
    assert send(buyer, f"/api/orders/{second_id}/cancel", key="another").status_code == 200


def test_a_claim_sent_again_with_its_key_answers_the_same_and_claims_once(api_client, staff, make_pool):
    pool = windowed_pool(staff, make_pool, prizes=(("Gold", 2),))
    winner = api_client()
    first_id, second_id = (winner.post(f"/api/pools/{pool.pk}/draw").json()["draw_id"] for _ in range(2))

    first = send(winner, f"/api/draws/{first_id}/claim")
    again = send(winner, f"/api/draws/{first_id}/claim")

    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json() == first.json() == {"draw_id": first_id, "status": "claimed"}
    assert again["Idempotent-Replayed"] == "true"
    settled = answered_row(Draw, first_id).settled_at
    assert send(winner, f"/api/draws/{first_id}/claim").json() == first.json()
    assert answered_row(Draw, first_id).settled_at == settled
    assert_error(send(winner, f"/api/draws/{second_id}/claim"), 422, "idempotency_key_reused")
    assert answered_row(Draw, second_id).status == Draw.Status.HELD


def test_a_refusal_is_kept_under_its_key_too(api_client, staff, make_voucher):
    voucher = windowed_voucher(staff, make_voucher)
    buyer = api_client()
    order_id = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    assert buyer.post(f"/api/orders/{order_id}/cancel").status_code == 200
    refused = send(buyer, f"/api/orders/{order_id}/cancel")
    assert_error(refused, 409, "cancelled")
    again = send(buyer, f"/api/orders/{order_id}/cancel")
    assert (again.status_code, again.json(), again["Idempotent-Replayed"]) == (409, refused.json(), "true")


# redis_lua: pending until the worker writes the record, then held.


def test_under_redis_lua_an_order_is_pending_then_held_and_then_cancelled(api_client, staff, make_voucher):
    voucher = windowed_voucher(staff, make_voucher, stock=1, strategy="redis_lua")
    buyer = api_client()
    answer = buyer.post(f"/api/vouchers/{voucher.pk}/purchase")
    assert answer.status_code == 202
    assert (answer.json()["status"], answer.json()["pay_by"]) == ("pending", None)
    order_id = answer.json()["order_id"]

    pending = send(buyer, f"/api/orders/{order_id}/cancel")
    assert_error(pending, 409, "pending")
    assert pending["Retry-After"] == "1"
    assert persist_voucher(voucher) == 1
    order = buyer.get(f"/api/orders/{order_id}").json()
    assert order["status"] == "held" and held_until(order["pay_by"]) > timedelta(seconds=WINDOW - 60)

    # The same key again: a pending refusal asked for the request again, and kept nothing.
    cancelled = send(buyer, f"/api/orders/{order_id}/cancel")
    assert (cancelled.status_code, cancelled.json()) == (200, {"order_id": order_id, "status": "cancelled"})
    assert "Idempotent-Replayed" not in cancelled
    assert reservations_client().stock(group_id=voucher.group_id) == {stock_row(voucher): 1}
    assert stock_of(voucher) == 1


def test_under_redis_lua_a_prize_is_pending_then_held_and_then_claimed(api_client, staff, make_pool):
    pool = windowed_pool(staff, make_pool, prizes=(("Gold", 1),), strategy="redis_lua")
    winner = api_client()
    answer = winner.post(f"/api/pools/{pool.pk}/draw")
    assert answer.status_code == 202
    draw_id = answer.json()["draw_id"]
    assert (answer.json()["status"], answer.json()["claim_by"]) == ("pending", None)
    assert_error(winner.post(f"/api/draws/{draw_id}/claim"), 409, "pending")
    assert persist_pool(pool) == 1
    draw = winner.get(f"/api/draws/{draw_id}").json()
    assert draw["status"] == "held" and draw["claim_by"] is not None
    assert winner.post(f"/api/draws/{draw_id}/claim").json() == {"draw_id": draw_id, "status": "claimed"}


# The rate limits, as a purchase's.


def test_a_cancel_over_the_limit_hears_429_and_changes_nothing(api_client, staff, make_voucher, settings):
    voucher = windowed_voucher(staff, make_voucher, stock=3, abandon_cooldown_seconds=0)
    buyer = api_client()
    first = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"cancel": {"user": (1, 60)}}
    assert buyer.post(f"/api/orders/{first}/cancel").status_code == 200
    second = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    refused = send(buyer, f"/api/orders/{second}/cancel")
    assert_error(refused, 429, "rate_limited")
    assert int(refused["Retry-After"]) >= 1
    assert answered_row(Order, second).status == Order.Status.HELD
    other = make_voucher(stock=1)  # the limit is this voucher's
    patch_json(staff, f"/api/admin/vouchers/{other.pk}", {"payment_window_seconds": WINDOW})
    third = buyer.post(f"/api/vouchers/{other.pk}/purchase").json()["order_id"]
    assert buyer.post(f"/api/orders/{third}/cancel").status_code == 200


# The audits count the lifecycle.


def lifecycle(voucher: Voucher, staff, api_client) -> None:
    """One order paid, one held, one cancelled, one expired."""
    buyers = [api_client() for _ in range(4)]
    ids = [buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"] for buyer in buyers]
    hold_settle(VOUCHER, answered_row(Order, ids[0]))
    assert buyers[2].post(f"/api/orders/{ids[2]}/cancel").status_code == 200
    answered_rows(Order, ids[3]).update(hold_until=timezone.now())
    assert holds_expire_due(VOUCHER, item_id=voucher.pk) == 1


HOLDS = {"held": 1, "settled": 1, "released": 2, "returned_twice": 0, "settled_and_released": 0}


def test_the_audits_answer_the_lifecycles_counts(api_client, staff, make_voucher, make_pool):
    voucher = windowed_voucher(staff, make_voucher, stock=5)
    lifecycle(voucher, staff, api_client)
    audit = staff.get(f"/api/admin/vouchers/{voucher.pk}/audit").json()
    assert audit["holds"] == HOLDS
    assert (audit["stock"], audit["conserved"], audit["ok"]) == (3, True, True)

    pool = windowed_pool(staff, make_pool, prizes=(("Gold", 3),))
    winner = api_client()
    draw_ids = [winner.post(f"/api/pools/{pool.pk}/draw").json()["draw_id"] for _ in range(2)]
    winner.post(f"/api/draws/{draw_ids[0]}/claim")
    pool_audit = staff.get(f"/api/admin/pools/{pool.pk}/audit").json()
    assert pool_audit["holds"] == {**HOLDS, "released": 0}
    assert pool_audit["ok"] is True


def test_manage_audit_prints_the_lifecycles_counts(api_client, staff, make_voucher, capsys):
    voucher = windowed_voucher(staff, make_voucher, stock=5)
    lifecycle(voucher, staff, api_client)
    call_command("audit", "--voucher", str(voucher.pk))
    header, row, summary = capsys.readouterr().out.splitlines()
    assert header.split()[7:12] == ["held", "paid", "released", "returned2x", "both"]
    assert row.split()[7:12] == ["1", "1", "2", "0", "0"]
    assert summary == "1 vouchers, 0 pools, 0 broken."
    call_command("audit", "--voucher", str(voucher.pk), "--json")
    assert json.loads(capsys.readouterr().out)["vouchers"][0]["holds"] == HOLDS


def test_the_admin_shows_held_counts_in_the_lists_and_the_audit(
    admin_client_, api_client, staff, make_voucher, make_pool
):
    voucher = windowed_voucher(staff, make_voucher, stock=5)
    lifecycle(voucher, staff, api_client)
    listed = admin_client_.get("/admin/orders/voucher/").content.decode()
    assert '<td class="field-held">1</td>' in listed
    assert '<td class="field-sold">2</td>' in listed  # held and paid: the released two gave theirs back
    page = admin_client_.get(f"/admin/orders/voucher/{voucher.pk}/change/").content.decode()
    for figure in ("held 1", "paid 1", "released 2", "returned twice 0", "paid and released 0"):
        assert figure in page

    pool = windowed_pool(staff, make_pool, prizes=(("Gold", 3),))
    api_client().post(f"/api/pools/{pool.pk}/draw")
    assert '<td class="field-held">1</td>' in admin_client_.get("/admin/lottery/pool/").content.decode()
    pool_page = admin_client_.get(f"/admin/lottery/pool/{pool.pk}/change/").content.decode()
    assert "held 1" in pool_page and "claimed 0" in pool_page
