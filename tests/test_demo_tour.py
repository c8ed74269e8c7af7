"""The README's five-minute tour, step by step on the demo ``make run`` seeds, through the
API the pages call: each step answers as the tour says. The tour once promised a second buy
right after a cancel (the cooldown refuses it for a minute), a "payment pending" the demo's
provider never shows, and two wins on a wheel that rarely gave them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db.models import F
from django.test import Client
from django.utils import timezone

from config.management.commands.seed_demo import DEMO_BUYER, DEMO_CLAIM_POOL, DEMO_POOL
from inventory.models import Abandoned
from inventory.tasks import holds_sweep
from lottery.models import Draw, Pool
from orders.models import Voucher

from .http import assert_error, post_json

pytestmark = pytest.mark.django_db


def test_the_readme_tour_answers_on_the_demo_as_it_says():
    call_command("seed_demo", "--quiet")
    username, password = DEMO_BUYER
    token = post_json(Client(), "/api/auth/login", {"username": username, "password": password}).json()["token"]
    api = Client(headers={"Authorization": f"Bearer {token}"})
    coffee = Voucher.objects.get(title="Coffee for 1 cent").pk
    box = Voucher.objects.get(title="Bakery box, pay within ten minutes").pk

    # 1. Buy: confirmed at once, then one per buyer.
    bought = api.post(f"/api/vouchers/{coffee}/purchase")
    assert (bought.status_code, bought.json()["status"]) == (201, "confirmed")
    assert_error(api.post(f"/api/vouchers/{coffee}/purchase"), 409, "already_purchased")

    # 2. Cancel: the box is held, cancelled, and bought again only after a minute's cooldown.
    held = api.post(f"/api/vouchers/{box}/purchase").json()
    assert held["status"] == "held" and held["pay_by"]
    assert api.post(f"/api/orders/{held['order_id']}/cancel").json()["status"] == "cancelled"
    cooling = api.post(f"/api/vouchers/{box}/purchase")
    assert_error(cooling, 429, "cooling_down")
    assert 50 <= int(cooling["Retry-After"]) <= 60

    # 3. Pay, a minute later: the provider confirms at once.
    Abandoned.objects.filter(user_id=bought.wsgi_request.user.pk).update(last_at=F("last_at") - timedelta(minutes=1))
    again = api.post(f"/api/vouchers/{box}/purchase").json()
    assert again["status"] == "held"
    paid = api.post(f"/api/orders/{again['order_id']}/pay")
    assert (paid.status_code, paid.json()["status"]) == (200, "paid")
    assert len(api.get("/api/orders").json()) == 3

    # 4. Draw: three draws each on the lucky wheel, a prize or none, its prizes the winner's at once.
    lucky = Pool.objects.get(name=DEMO_POOL).pk
    for left in (2, 1, 0):
        draw = api.post(f"/api/pools/{lucky}/draw").json()
        assert (draw["draws_left"], draw["claim_by"]) == (left, None)
    assert_error(api.post(f"/api/pools/{lucky}/draw"), 409, "draw_limit")

    # 5. Claim: every draw of the prize wheel wins, held for its claim; one claimed, one let go.
    wheel = Pool.objects.get(name=DEMO_CLAIM_POOL)
    claimed, let_go = (api.post(f"/api/pools/{wheel.pk}/draw").json() for _ in range(2))
    for won in (claimed, let_go):
        assert won["prize"] is not None and won["claim_by"], won
    assert api.post(f"/api/draws/{claimed['draw_id']}/claim").json()["status"] == "claimed"
    left = {prize.pk: prize.stock.quantity for prize in wheel.prizes.select_related("stock")}
    Draw.objects.filter(pool=wheel, status="held").update(hold_until=timezone.now() - timedelta(seconds=1))
    assert holds_sweep("pool") == 1  # two minutes later: forfeited, the prize back in the wheel
    back = {prize.pk: prize.stock.quantity for prize in wheel.prizes.select_related("stock")}
    assert back[let_go["prize"]["id"]] == left[let_go["prize"]["id"]] + 1
    assert_error(api.post(f"/api/draws/{let_go['draw_id']}/claim"), 409, "forfeited")
