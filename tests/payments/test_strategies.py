"""A confirmation settles the order under the voucher's own strategy, inside the transaction
that resolves its payment: paid within the window, refunded with the unit back in stock
once (and in Redis under redis_lua) after it, under every guarded strategy."""

from __future__ import annotations

import pytest

from inventory.holds import holds_expire_due
from inventory.models import Abandoned
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.values import GroupKeys
from orders.product import VOUCHER
from payments.models import Payment
from payments.selectors import payments_audit
from tests.stock import stock_left, stock_row

from ..http import assert_error
from ..test_redis_lua import persist_voucher
from .conftest import buy, callback, held_until_past, order_row, pay

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]

GUARDED = ["db_atomic", "db_pessimistic", "db_optimistic", "redis_lock", "redlock", "redis_lua"]


@pytest.mark.parametrize("strategy", GUARDED)
def test_a_confirmation_pays_or_refunds_under_every_guarded_strategy(
    strategy, request, settings, api_client, held_voucher
):
    if strategy == "redlock":
        request.getfixturevalue("redlock_urls")
    settings.PAYMENT_CALLBACK_URL = ""
    settings.PAYMENT_PROVIDER_DELAY_MS = 0
    voucher = held_voucher(stock=2, strategy=strategy)
    payer, late = api_client(), api_client()
    paid, refunded = buy(payer, voucher), buy(late, voucher)
    if strategy == "redis_lua":
        assert_error(pay(payer, paid), 409, "pending")  # not written yet: nothing charged
        assert persist_voucher(voucher) == 2

    assert pay(payer, paid).status_code == 200
    settings.PAYMENT_PROVIDER_DELAY_MS = 500
    assert pay(late, refunded).status_code == 202
    held_until_past(refunded)
    assert callback(Payment.objects.get(status="requested").reference).json()["status"] == "refunded"

    assert order_row(paid).status == "paid"
    assert (order_row(refunded).status, order_row(refunded).releases) == ("expired", 1)
    assert stock_left(voucher) == 1
    if strategy == "redis_lua":
        assert reservations_client().stock(group_id=voucher.group_id) == {stock_row(voucher): 1}
    audit = payments_audit(voucher_id=voucher.pk)
    assert (audit.paid, audit.refunded, audit.ok) == (1, 1, True)


@pytest.mark.parametrize("released_by", ["callback", "expiry"])
@pytest.mark.parametrize("strategy", GUARDED)
def test_a_payment_made_in_time_and_confirmed_late_is_no_abandoned_hold(
    strategy, released_by, request, settings, api_client, held_voucher
):
    """The buyer paid before ``pay_by`` (202); the confirmation came after it and was refunded
    ``expired``, the order released by that confirmation or by the expiry before it. The buyer
    let nothing lapse: no abandoned hold is counted, in the database or in redis_lua's Redis,
    and their next purchase is not cooling down (60 s, a cap of 2: the defaults)."""
    if strategy == "redlock":
        request.getfixturevalue("redlock_urls")
    settings.PAYMENT_CALLBACK_URL = ""
    settings.PAYMENT_PROVIDER_DELAY_MS = 500
    voucher = held_voucher(stock=1, strategy=strategy)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    if strategy == "redis_lua":
        assert persist_voucher(voucher) == 1
    assert pay(buyer, order_id).status_code == 202
    held_until_past(order_id)
    if released_by == "expiry":
        assert holds_expire_due(VOUCHER, item_id=voucher.pk) == 1

    assert callback(Payment.objects.get().reference).json()["status"] == "refunded"

    assert (order_row(order_id).status, stock_left(voucher)) == ("expired", 1)
    assert not Abandoned.objects.filter(user=buyer.user).exists()
    if strategy == "redis_lua":
        abandoned = GroupKeys.of(voucher.group_id).abandoned
        assert reservations_client().client.hget(abandoned, str(buyer.user.pk)) is None
    again = buyer.post(f"/api/vouchers/{voucher.pk}/purchase")
    assert again.status_code in (201, 202), again.content


@pytest.mark.parametrize("strategy", ["db_atomic", "redis_lua"])
def test_a_hold_let_lapse_without_a_payment_is_still_an_abandoned_hold(strategy, settings, api_client, held_voucher):
    """What the rule is for: an order nobody paid, expired, counts, and the buyer cools down."""
    voucher = held_voucher(stock=1, strategy=strategy)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    if strategy == "redis_lua":
        assert persist_voucher(voucher) == 1
    held_until_past(order_id)
    assert holds_expire_due(VOUCHER, item_id=voucher.pk) == 1

    assert Abandoned.objects.get(user=buyer.user).holds == 1
    assert_error(buyer.post(f"/api/vouchers/{voucher.pk}/purchase"), 429, "cooling_down")


def test_a_payment_waiting_from_before_the_mark_is_marked_by_the_migration(settings, api_client, held_voucher):
    """``orders.0018``: a held order whose payment waits, made before pays marked their order,
    is marked as a pay marks it; its late confirmation's lapse is then no abandoned hold."""
    import importlib

    from django.apps import apps

    backfill = importlib.import_module("orders.migrations.0018_settle_asked_backfill")
    settings.PAYMENT_CALLBACK_URL = ""
    settings.PAYMENT_PROVIDER_DELAY_MS = 500
    voucher = held_voucher(stock=2, strategy="db_atomic")
    buyer, idle = api_client(), api_client()
    order_id, idle_id = buy(buyer, voucher), buy(idle, voucher)
    assert pay(buyer, order_id).status_code == 202
    payment = Payment.objects.get()
    type(order_row(order_id)).objects.update(settle_asked_at=None)  # as before the mark
    backfill.settle_asked_marked(apps, None)
    assert order_row(order_id).settle_asked_at == payment.created_at
    assert order_row(idle_id).settle_asked_at is None  # no payment: a lapse is abandoned
    held_until_past(order_id)
    assert callback(payment.reference).json()["status"] == "refunded"
    assert not Abandoned.objects.filter(user=buyer.user).exists()
