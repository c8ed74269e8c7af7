"""A confirmation settles the order under the voucher's own strategy, inside the transaction
that resolves its payment: paid within the window, refunded with the unit back in stock
once (and in Redis under redis_lua) after it, under every guarded strategy."""

from __future__ import annotations

import pytest

from inventory.redis_lua.client import reservations_client
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
