"""A lifecycle run's side against the test database: its items get their hold window, the
drain waits for every hold and payment, and the figures it is judged on are read from
the drained audit, the outcome lines and the out-of-stock marks."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from inventory.holds import hold_lapse
from inventory.product import product_of
from loadtests import lifecycle
from loadtests.products import PRODUCTS, Supply
from lottery.models import Draw, Pool
from lottery.selectors import draw_get, pool_get
from lottery.services import draw_claim, pool_draw
from orders.models import Order, Voucher
from orders.selectors import order_get
from orders.services import order_cancel, order_purchase
from payments.models import ProviderCharge
from payments.services import order_pay

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr(lifecycle, "QUIET_SECONDS", 0.1)


def lapse(kind: str, record) -> None:
    """Its deadline passed: released as the expiry task releases it."""
    assert hold_lapse(product_of(kind), record, now=timezone.now() + timedelta(hours=1))


def out_of_stock_at(folder, moment: float) -> None:
    (folder / "out-of-stock-1").write_text(f"{moment:.3f}\n")


def test_only_a_lifecycle_scenarios_items_get_the_hold_window():
    class Args:
        hold_seconds = 3

    assert (lifecycle.hold_seconds(Args(), True), lifecycle.hold_seconds(Args(), False)) == (3, 0)
    assert lifecycle.hold_seconds(object(), True) == 2  # the race lab's arguments name none
    settings = lifecycle.server_settings(400)
    assert settings["PAYMENT_PROVIDER_DELAY_MS"] == "400" and settings["HOLDS_SWEEP_SECONDS"] == "1"
    assert "at once" in lifecycle.describe_settings(0) and "after 400 ms" in lifecycle.describe_settings(400)


def test_a_vouchers_paid_cancelled_and_expired_orders_drain_and_are_counted(make_buyer, tmp_path, settings):
    # A callback to come, as a load run's server has one: the charge waits for its acknowledgement.
    settings.PAYMENT_CALLBACK_URL = "http://127.0.0.1:9/api/payments/callback"
    product = PRODUCTS["voucher"]
    target = product.create(title="load", strategy="db_atomic", supply=Supply(stock=3, hold_seconds=60))
    voucher = Voucher.objects.get(pk=target.pk)
    assert voucher.hold_seconds == 60
    buyers = [make_buyer() for _ in range(3)]
    paid, cancelled, abandoned = (order_purchase(user=buyer, voucher=voucher) for buyer in buyers)
    assert {paid.status, cancelled.status, abandoned.status} == {Order.Status.HELD}
    assert order_pay(order=order_get(user=buyers[0], order_id=paid.public_id)).status == "paid"
    order_cancel(order=order_get(user=buyers[1], order_id=cancelled.public_id))
    assert product.sample(target).taken == 2  # the cancelled order holds nothing

    # One hold, and the charge the site has not acknowledged (no callback reaches a test).
    held, unresolved, *_ = lifecycle.outstanding(product, target)
    assert held == 1 and unresolved >= 1
    lapse("voucher", abandoned)
    assert lifecycle.wait_until_drained(product, target, timeout=0.3) is None
    ProviderCharge.objects.update(
        acknowledged_at=timezone.now(), acknowledgements=1, sent_at=timezone.now() - timedelta(seconds=2)
    )
    assert lifecycle.outstanding(product, target)[:2] == (0, 0)
    assert lifecycle.wait_until_drained(product, target, timeout=5) is not None

    outcomes = [
        ["pay", "paid", str(paid.public_id)],
        ["pay", "paid", str(abandoned.public_id)],
        ["pay", "expired", "1"],
    ]
    out_of_stock_at(tmp_path, time.time())
    figures = lifecycle.figures(product, target, product.audit(target), outcomes, tmp_path)
    assert figures == {
        "held_left": 0, "settled": 1, "released": 2, "resold": 0, "returned_twice": 0, "settled_and_released": 0,
        # A 200 for the order that expired: not paid.
        "unsettled_200s": 1,
        # Both units came back within the margin of the last sold-out.
        "returns_unsold": 0,
        "charges": 1, "refunds": 0, "payments_off": 0,
    }  # fmt: skip


def test_units_back_before_buyers_were_still_refused_are_returns_left_unsold(make_buyer, tmp_path):
    product = PRODUCTS["voucher"]
    target = product.create(title="load", strategy="db_atomic", supply=Supply(stock=2, hold_seconds=60))
    voucher = Voucher.objects.get(pk=target.pk)
    buyer = make_buyer()
    order = order_purchase(user=buyer, voucher=voucher)
    order_cancel(order=order_get(user=buyer, order_id=order.public_id))
    audit = product.audit(target)
    assert lifecycle.figures(product, target, audit, [], tmp_path)["returns_unsold"] == 0  # nobody refused
    out_of_stock_at(tmp_path, time.time() + 5)
    # Two units in stock, neither released since the crowd was last told sold out.
    assert lifecycle.figures(product, target, audit, [], tmp_path)["returns_unsold"] == 2


def test_a_pools_claimed_and_forfeited_prizes_are_counted_and_it_has_no_payments(make_buyer, tmp_path):
    product = PRODUCTS["pool"]
    target = product.create(
        title="load", strategy="db_atomic", supply=Supply(stock=4, prizes=2, draws_per_user=2, hold_seconds=60)
    )
    assert Pool.objects.get(pk=target.pk).hold_seconds == 60
    user = make_buyer()
    claimed, forfeited = (pool_draw(user=user, pool=pool_get(pool_id=target.pk)) for _ in range(2))
    assert claimed.status == Draw.Status.HELD
    draw_claim(draw=draw_get(user=user, draw_id=claimed.public_id))
    lapse("pool", forfeited)
    assert lifecycle.wait_until_drained(product, target, timeout=5) is not None
    figures = lifecycle.figures(
        product, target, product.audit(target), [["claim", "claimed", str(claimed.public_id)]], tmp_path
    )
    assert figures == {
        "held_left": 0, "settled": 1, "released": 1, "resold": 0, "returned_twice": 0, "settled_and_released": 0,
        "unsettled_200s": 0, "returns_unsold": 0,
    }  # fmt: skip
    assert product.sample(target).taken == 1
