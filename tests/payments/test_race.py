"""Many processes at one held order at once: the buyer paying again and again, the provider's
confirmation arriving again and again, and the buyer cancelling. Whatever wins, every
confirmation ends as exactly one paid order or one refund, every pay answered paid is a paid
order, and the unit is sold or back in stock, once."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from orders.models import Order
from orders.selectors import order_get
from orders.services import order_cancel, order_purchase
from payments.models import Payment, ProviderCharge
from payments.selectors import payments_audit
from payments.services import order_pay, payment_confirm
from tests.stock import stock_left

from ..buyers import act_concurrently

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.race]

# Refusals a racing call may meet: the order paid or cancelled by another, or a lock busy.
EXPECTED = {"already_paid", "cancelled", "busy"}
STRATEGIES = ["db_atomic", "db_pessimistic", "redis_lock"]


def racing(buyer, order, reference: str | None):
    """The act of one racing call: a pay, the provider's confirmation of ``reference`` (of the
    order's newest payment when None: none yet answers ``none``), or the buyer's cancel."""

    def act(what: str):
        user = get_user_model()(pk=buyer.pk)
        if what == "pay":
            return what, order_pay(order=order_get(user=user, order_id=order.public_id)).status
        if what == "confirm":
            newest = Payment.objects.filter(order_id=order.pk).order_by("-id").values_list("reference", flat=True)
            charged = reference or newest.first()
            return what, "none" if charged is None else payment_confirm(reference=charged).status
        return what, order_cancel(order=order_get(user=user, order_id=order.public_id)).status

    return act


def assert_one_outcome_each(outcome, order, voucher) -> None:
    assert not outcome.errors, outcome.errors[0]
    assert set(outcome.refusals) <= EXPECTED, outcome.refusals
    # What the provider sends again until acknowledged: every payment resolved in the end.
    for waiting in Payment.objects.filter(status=Payment.Status.REQUESTED):
        payment_confirm(reference=waiting.reference)
    order.refresh_from_db()
    payments = list(Payment.objects.all())
    paid = [payment for payment in payments if payment.status == Payment.Status.PAID]
    assert all(payment.status in ("paid", "refunded") for payment in payments)
    assert ProviderCharge.objects.count() == len(payments)
    assert len(paid) <= 1
    cancelled = [status for what, status in outcome.confirmed if what == "cancel"]
    if paid:
        assert order.status == Order.Status.PAID and not cancelled
    else:
        assert order.status == Order.Status.CANCELLED and cancelled == ["cancelled"]
    # Every pay answered paid, every confirmation answered paid, is the paid order.
    answered_paid = [what for what, status in outcome.confirmed if what != "cancel" and status == "paid"]
    assert not answered_paid or order.status == Order.Status.PAID
    assert stock_left(voucher) == (0 if paid else 1)
    assert order.releases == (0 if paid else 1)
    audit = payments_audit(voucher_id=voucher.pk)
    assert (audit.waiting, audit.confirmations, audit.ok) == (0, len(payments), True), audit


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_pays_confirmations_and_a_cancel_at_one_order_end_as_one_outcome_each(
    strategy, settings, make_user, held_voucher
):
    """One payment waits for its confirmation when the race starts."""
    settings.PAYMENT_CALLBACK_URL = ""
    voucher = held_voucher(stock=1, strategy=strategy)
    buyer = make_user()
    order = order_purchase(user=buyer, voucher=voucher)
    settings.PAYMENT_PROVIDER_DELAY_MS = 500
    reference = order_pay(order=order_get(user=buyer, order_id=order.public_id)).reference
    # In the race a pay that charges is confirmed in its own request.
    settings.PAYMENT_PROVIDER_DELAY_MS = 0

    outcome = act_concurrently(
        act=racing(buyer, order, reference),
        plan=[["pay", "confirm", "cancel"], ["confirm", "pay", "confirm"], ["pay", "confirm", "pay"]],
        race_ms=20,
    )

    assert_one_outcome_each(outcome, order, voucher)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_pays_that_charge_racing_confirmations_and_a_cancel_end_as_one_outcome_each(
    strategy, settings, make_user, held_voucher
):
    """Nothing charged when the race starts: the pays race to charge, each confirmed in its
    own request, while the provider's callbacks and the cancel come."""
    settings.PAYMENT_CALLBACK_URL = ""
    settings.PAYMENT_PROVIDER_DELAY_MS = 0
    voucher = held_voucher(stock=1, strategy=strategy)
    buyer = make_user()
    order = order_purchase(user=buyer, voucher=voucher)

    outcome = act_concurrently(
        act=racing(buyer, order, None),
        plan=[["pay", "confirm", "cancel"], ["pay", "pay", "confirm"], ["pay", "confirm", "pay"]],
        race_ms=20,
    )

    assert_one_outcome_each(outcome, order, voucher)
