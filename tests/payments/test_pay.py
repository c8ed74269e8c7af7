"""Paying a held order through the API, and the provider's confirmation through its signed
callback: paid within the window, refused and charged nothing outside it, refunded when the
confirmation comes after the hold ended (also once another buyer bought the unit back),
resolved once however often it comes, and never on a forged signature. The callback is the
one the provider posts, sent here through the test client; the provider's own worker is
tested in tests/payments/test_provider_worker.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from uuid import uuid4

import pytest
from django.db import OperationalError
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError

from core.namespace import key_prefix
from inventory.errors import AlreadyPaid, StateMissing
from inventory.holds import hold_lapse
from inventory.models import Abandoned
from inventory.strategies.changes import rule_scope
from locking import Lock
from locking.integration import locks_redis
from orders.models import Order
from orders.product import VOUCHER
from orders.selectors import order_get
from orders.services import order_cancel
from payments import services
from payments.models import Payment, ProviderCharge
from payments.provider import provider_resend_due
from payments.selectors import payments_audit
from payments.signature import callback_sign
from tests.stock import stock_left
from tests.waiting import wait_until

from ..http import assert_error
from .conftest import buy, callback, held_until_past, order_row, pay

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def provider(settings):
    """The provider answering at once, posting no callback: each test says otherwise."""
    settings.PAYMENT_PROVIDER_DELAY_MS = 0
    settings.PAYMENT_PROVIDER_JITTER_MS = 0
    settings.PAYMENT_PROVIDER_DUPLICATE_RATE = 0
    settings.PAYMENT_PROVIDER_LOSS_RATE = 0
    settings.PAYMENT_CALLBACK_URL = ""
    return settings


def stock_of(voucher) -> int:
    return stock_left(voucher)


def test_a_pay_within_the_window_is_paid_at_once(api_client, held_voucher):
    voucher = held_voucher(stock=2)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    held = buyer.get(f"/api/orders/{order_id}").json()
    assert (held["status"], held["refund"]) == ("held", None)
    assert held["pay_by"] is not None

    answer = pay(buyer, order_id)

    assert answer.status_code == 200, answer.content
    assert answer.json() == {"order_id": order_id, "status": "paid", "payment": "paid"}
    assert buyer.get(f"/api/orders/{order_id}").json()["status"] == "paid"
    payment = Payment.objects.get()
    assert (payment.status, payment.open_guard) == ("paid", None)
    assert ProviderCharge.objects.get().reference == payment.reference
    assert stock_of(voucher) == 1
    audit = payments_audit(voucher_id=voucher.pk)
    assert (audit.confirmations, audit.paid, audit.refunded, audit.ok) == (1, 1, 0, True)


def test_a_pay_after_the_deadline_is_refused_expired_and_charges_nothing(api_client, held_voucher):
    voucher = held_voucher(stock=1)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    held_until_past(order_id)

    assert_error(pay(buyer, order_id), 409, "expired")

    assert not Payment.objects.exists() and not ProviderCharge.objects.exists()
    assert order_row(order_id).status == "expired"  # released then and there, as the expiry does
    assert stock_of(voucher) == 1


def test_a_pay_of_an_order_not_held_is_refused_in_the_words_of_its_state(api_client, held_voucher, make_voucher):
    # No cooldown after the cancel (docs/design.md, "Abandoned holds"): the buyer buys again.
    voucher = held_voucher(abandon_cooldown_seconds=0)
    buyer, other = api_client(), api_client()
    cancelled = buy(buyer, voucher)
    order_cancel(order=order_get(user=buyer.user, order_id=cancelled))
    assert_error(pay(buyer, cancelled), 409, "cancelled")
    paid = buy(buyer, voucher)
    assert pay(buyer, paid).status_code == 200
    assert_error(pay(buyer, paid), 409, "already_paid")
    # Paid when made: a voucher without a payment window holds nothing.
    assert_error(pay(buyer, buy(buyer, make_voucher())), 409, "already_paid")
    assert_error(pay(other, paid), 404, "not_found")
    assert Payment.objects.count() == ProviderCharge.objects.count() == 1


def test_a_delayed_confirmation_answers_202_and_the_callback_pays(api_client, held_voucher, provider):
    provider.PAYMENT_PROVIDER_DELAY_MS = 500
    buyer = api_client()
    order_id = buy(buyer, held_voucher())

    answer = pay(buyer, order_id)

    assert answer.status_code == 202, answer.content
    assert answer.json() == {"order_id": order_id, "status": "held", "payment": "pending"}
    assert buyer.get(f"/api/orders/{order_id}").json()["status"] == "held"
    reference = Payment.objects.get().reference
    confirmed = callback(reference)
    assert confirmed.status_code == 200, confirmed.content
    assert confirmed.json() == {"reference": reference, "status": "paid"}
    assert buyer.get(f"/api/orders/{order_id}").json()["status"] == "paid"


def test_a_second_pay_while_the_first_waits_charges_nothing_more(api_client, held_voucher, provider):
    provider.PAYMENT_PROVIDER_DELAY_MS = 500
    buyer = api_client()
    order_id = buy(buyer, held_voucher())
    assert pay(buyer, order_id).status_code == 202
    assert pay(buyer, order_id).status_code == 202
    assert Payment.objects.count() == ProviderCharge.objects.count() == 1
    assert callback(Payment.objects.get().reference).json()["status"] == "paid"
    assert_error(pay(buyer, order_id), 409, "already_paid")


def test_a_confirmation_after_the_hold_expired_is_refunded_and_the_unit_sold_once(api_client, held_voucher, provider):
    """The unit went back on sale and another buyer bought and paid for it before the first
    buyer's confirmation came: that one is refunded, the unit stays the second buyer's."""
    provider.PAYMENT_PROVIDER_DELAY_MS = 500
    voucher = held_voucher(stock=1)
    first, second = api_client(), api_client()
    late = buy(first, voucher)
    assert pay(first, late).status_code == 202
    hold_lapse(VOUCHER, held_until_past(late))  # the expiry at the deadline
    assert stock_of(voucher) == 1
    provider.PAYMENT_PROVIDER_DELAY_MS = 0
    bought = buy(second, voucher)
    assert pay(second, bought).status_code == 200

    confirmed = callback(Payment.objects.get(order=order_row(late)).reference)

    assert confirmed.json()["status"] == "refunded"
    shown = first.get(f"/api/orders/{late}").json()
    assert shown["status"] == "expired"
    assert shown["refund"]["reason"] == "expired"
    assert shown["refund"]["reference"] == Payment.objects.get(order=order_row(late)).reference
    assert ProviderCharge.objects.get(reference=shown["refund"]["reference"]).refunded_at is not None
    assert second.get(f"/api/orders/{bought}").json()["status"] == "paid"
    assert stock_of(voucher) == 0
    assert order_row(late).releases == 1
    audit = payments_audit(voucher_id=voucher.pk)
    assert (audit.confirmations, audit.paid, audit.refunded, audit.waiting, audit.ok) == (2, 1, 1, 0, True)


def test_a_confirmation_past_the_deadline_before_the_expiry_ran_is_refunded_and_releases(
    api_client, held_voucher, provider
):
    provider.PAYMENT_PROVIDER_DELAY_MS = 500
    voucher = held_voucher(stock=1)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    assert pay(buyer, order_id).status_code == 202
    assert held_until_past(order_id).status == "held"  # the expiry has not run yet

    assert callback(Payment.objects.get().reference).json()["status"] == "refunded"

    assert order_row(order_id).status == "expired"
    assert stock_of(voucher) == 1


def test_a_confirmation_of_a_cancelled_order_is_refunded(api_client, held_voucher, provider):
    provider.PAYMENT_PROVIDER_DELAY_MS = 500
    voucher = held_voucher(stock=1)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    assert pay(buyer, order_id).status_code == 202
    order_cancel(order=order_get(user=buyer.user, order_id=order_id))

    assert callback(Payment.objects.get().reference).json()["status"] == "refunded"

    assert buyer.get(f"/api/orders/{order_id}").json()["refund"]["reason"] == "cancelled"
    assert stock_of(voucher) == 1
    assert payments_audit(voucher_id=voucher.pk).ok


def test_duplicate_confirmations_resolve_the_payment_once(api_client, held_voucher, provider):
    provider.PAYMENT_PROVIDER_DELAY_MS = 500
    buyer = api_client()
    order_id = buy(buyer, held_voucher())
    assert pay(buyer, order_id).status_code == 202
    reference = Payment.objects.get().reference

    first = callback(reference).json()["status"]
    settled_at = Payment.objects.get().settled_at
    again = [callback(reference).json()["status"] for _ in range(2)]

    assert [first, *again] == ["paid"] * 3
    assert Payment.objects.get().settled_at == settled_at
    assert_error(pay(buyer, order_id), 409, "already_paid")
    assert payments_audit().paid == 1


def test_a_callback_without_the_providers_signature_is_refused_and_changes_nothing(api_client, held_voucher, provider):
    provider.PAYMENT_PROVIDER_DELAY_MS = 500
    buyer = api_client()
    order_id = buy(buyer, held_voucher())
    assert pay(buyer, order_id).status_code == 202
    reference = Payment.objects.get().reference
    signed = json.dumps({"reference": reference, "status": "confirmed"}).encode()

    assert_error(callback(reference, signature="0" * 64), 403, "bad_signature")
    assert_error(callback(reference, signature=""), 403, "bad_signature")
    # Another body under a signature of the provider's: the signature covers every byte.
    assert_error(callback(reference, body=signed + b" ", signature=callback_sign(signed)), 403, "bad_signature")

    assert Payment.objects.get().status == "requested"
    assert Order.objects.get().status == "held"


def test_the_callback_of_a_charge_nobody_made_is_404():
    assert_error(callback(uuid4().hex), 404, "not_found")


def test_a_pay_with_an_idempotency_key_answers_its_first_answer_again(api_client, held_voucher):
    buyer = api_client()
    order_id = buy(buyer, held_voucher())
    key = str(uuid4())
    first = pay(buyer, order_id, **{"Idempotency-Key": key})
    again = pay(buyer, order_id, **{"Idempotency-Key": key})
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Payment.objects.count() == 1


def test_a_pay_counts_its_rate_limits_on_the_orders_voucher_as_a_cancel_does(api_client, held_voucher, settings):
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"pay": {"user": (1, 60)}}
    buyer = api_client()
    order_id = buy(buyer, held_voucher())
    assert pay(buyer, order_id).status_code == 200
    refused = pay(buyer, order_id)  # counted before the service, which would answer already_paid
    assert_error(refused, 429, "rate_limited")
    assert int(refused["Retry-After"]) >= 1
    assert pay(buyer, buy(buyer, held_voucher())).status_code == 200  # the limit is this voucher's


def test_a_pay_again_finishes_a_payment_whose_immediate_confirmation_was_lost(api_client, held_voucher):
    """The provider confirms at once and posts no callback; a pay whose confirmation found
    the order's strategy busy (LockBusy) left its payment requested, with nothing on the
    way to resolve it. The buyer's next pay confirms that payment, charging nothing more."""
    voucher = held_voucher(stock=2)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    lost = Payment.objects.create(order=order_row(order_id), reference=uuid4().hex, open_guard=order_row(order_id).pk)
    ProviderCharge.objects.create(reference=lost.reference, sent_at=lost.created_at, callbacks=0)

    answer = pay(buyer, order_id)

    assert answer.status_code == 200, answer.content
    assert answer.json() == {"order_id": order_id, "status": "paid", "payment": "paid"}
    assert Payment.objects.get().reference == lost.reference
    assert ProviderCharge.objects.count() == 1
    assert order_row(order_id).status == Order.Status.PAID
    assert stock_of(voucher) == 1
    assert payments_audit(voucher_id=voucher.pk).ok


def lost_payment(order_id: int, *, age: timedelta) -> Payment:
    """A payment whose immediate confirmation found the order's strategy busy, made ``age`` ago."""
    order = order_row(order_id)
    lost = Payment.objects.create(order=order, reference=uuid4().hex, open_guard=order.pk)
    Payment.objects.filter(pk=lost.pk).update(created_at=timezone.now() - age)
    ProviderCharge.objects.create(reference=lost.reference, sent_at=timezone.now() - age, callbacks=0)
    return lost


def test_the_beat_confirms_a_payment_no_callback_will_bring_once_a_resend_would_be_due(
    api_client, held_voucher, settings
):
    """No callback URL: nothing posts the confirmation a busy strategy left unapplied. The beat
    applies it once ``PAYMENT_PROVIDER_RESEND_SECONDS`` have passed: paid while the hold is
    held, refunded (the charge given back) once it has lapsed."""
    settings.PAYMENT_PROVIDER_RESEND_SECONDS = 30
    voucher = held_voucher(stock=3)
    buyer = api_client()
    young = lost_payment(buy(buyer, voucher), age=timedelta(seconds=5))
    due = lost_payment(buy(api_client(), voucher), age=timedelta(seconds=31))
    late_id = buy(api_client(), voucher)
    late = lost_payment(late_id, age=timedelta(seconds=31))
    held_until_past(late_id)

    assert services.payments_unapplied_confirm() == 2

    statuses = dict(Payment.objects.values_list("reference", "status"))
    assert [statuses[p.reference] for p in (young, due, late)] == ["requested", "paid", "refunded"]
    assert ProviderCharge.objects.get(reference=late.reference).refunded_at is not None
    assert order_row(late_id).status == "expired"
    assert stock_of(voucher) == 1  # two held (one paid), the lapsed one's unit back
    assert services.payments_unapplied_confirm() == 0  # nothing more due
    assert payments_audit(voucher_id=voucher.pk).ok


def test_with_a_callback_url_the_beat_leaves_confirmations_to_the_callbacks(api_client, held_voucher, settings):
    settings.PAYMENT_CALLBACK_URL = "http://127.0.0.1:9/api/payments/callback"
    lost = lost_payment(buy(api_client(), held_voucher()), age=timedelta(hours=1))
    assert services.payments_unapplied_confirm() == 0
    assert Payment.objects.get(pk=lost.pk).status == "requested"


def test_a_provider_that_confirms_late_with_nowhere_to_post_is_a_configuration_error(settings):
    from django.core.checks import run_checks

    settings.PAYMENT_PROVIDER_DELAY_MS = 200
    assert "payments.E001" in [error.id for error in run_checks()]
    settings.PAYMENT_CALLBACK_URL = "http://127.0.0.1:8000/api/payments/callback"
    assert "payments.E001" not in [error.id for error in run_checks()]


def deadline_during_the_charge(monkeypatch, order_id: int, then=None) -> None:
    """The order's deadline 300 ms away, and the provider's charge lasting until it has passed
    (then ``then()``): the pay reads the clock before its charge, and its settle after."""
    deadline = timezone.now() + timedelta(milliseconds=300)
    Order.objects.filter(pk=order_row(order_id).pk).update(hold_until=deadline)
    charge = services.provider_charge

    def slow_charge(**kwargs):
        wait_until(lambda: timezone.now() > deadline, "the deadline passed during the charge")
        if then is not None:
            then()
        return charge(**kwargs)

    monkeypatch.setattr(services, "provider_charge", slow_charge)


def test_a_pay_whose_deadline_passes_while_it_charges_is_refunded_expired(api_client, held_voucher, monkeypatch):
    """The pay read the clock before its charge; the deadline came during it. The settle reads
    the clock again once it holds the payment: the order is expired and the charge refunded,
    not paid past its deadline. Paid before ``pay_by``, the release is no abandoned hold, and
    the buyer may buy again at once."""
    voucher = held_voucher(stock=1)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    deadline_during_the_charge(monkeypatch, order_id)
    assert_error(pay(buyer, order_id), 409, "expired")
    assert Payment.objects.get().status == "refunded"
    assert order_row(order_id).status == "expired"
    assert stock_of(voucher) == 1
    assert not Abandoned.objects.filter(user=buyer.user).exists()
    monkeypatch.undo()
    assert buyer.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 201


def test_a_refund_past_the_deadline_answers_expired_while_the_orders_release_is_busy(
    api_client, held_voucher, monkeypatch, settings
):
    """Under ``redis_lock`` the order is released under its buyer's lock, which another
    request of the buyer holds: the refund is committed all the same, the pay answers 409
    ``expired``, and the expiry releases the order once the lock is let go."""
    voucher = held_voucher(stock=1, strategy="redis_lock")
    buyer = api_client()
    order_id = buy(buyer, voucher)
    order = order_row(order_id)
    user_lock = Lock(locks_redis(), rule_scope("voucher", voucher.pk, order.user_id), key_prefix=key_prefix(), lease=30)

    def lock_taken():
        assert user_lock.acquire()

    deadline_during_the_charge(monkeypatch, order_id, then=lock_taken)
    try:
        assert_error(pay(buyer, order_id), 409, "expired")
        assert order_row(order_id).status == "held"  # its release was busy
    finally:
        user_lock.release()
    assert Payment.objects.get().status == "refunded"
    assert hold_lapse(VOUCHER, order_row(order_id))
    assert order_row(order_id).status == "expired" and stock_of(voucher) == 1


def test_a_pay_whose_deadline_passes_while_it_waits_on_the_orders_guard_charges_nothing(
    api_client, held_voucher, monkeypatch
):
    """It passed the deadline check, then waited on the order's open payment (another pay's
    confirmation refunding it as expired, whose release follows its commit) and found the
    order still held, but past its deadline: refused ``expired`` and the order released,
    nothing charged, where it used to charge and refund."""
    voucher = held_voucher(stock=1)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    deadline = timezone.now() + timedelta(milliseconds=300)
    Order.objects.filter(pk=order_row(order_id).pk).update(hold_until=deadline)
    payable = services._payable

    def then_waits(order, now):
        payable(order, now)
        wait_until(lambda: timezone.now() > deadline, "the deadline passed while it waited")

    monkeypatch.setattr(services, "_payable", then_waits)
    assert_error(pay(buyer, order_id), 409, "expired")
    assert not Payment.objects.exists() and not ProviderCharge.objects.exists()
    assert order_row(order_id).status == "expired" and stock_of(voucher) == 1


def test_a_late_pay_of_an_order_a_callback_paid_meanwhile_hears_already_paid(api_client, held_voucher):
    voucher = held_voucher(stock=1)
    order_id = buy(api_client(), voucher)
    read = order_row(order_id)  # as the pay read it: held, its deadline just past
    read.hold_until = timezone.now() - timedelta(seconds=1)
    Order.objects.filter(pk=read.pk).update(status="paid", settled_at=timezone.now())

    with pytest.raises(AlreadyPaid):
        services.order_pay(order=read)
    assert order_row(order_id).status == "paid"


def test_charges_made_with_nowhere_to_post_are_not_sent_again_once_a_callback_url_is_set(
    api_client, held_voucher, settings
):
    buyer = api_client()
    order_id = buy(buyer, held_voucher())
    assert pay(buyer, order_id).json()["status"] == "paid"  # confirmed at once, no callback
    settings.PAYMENT_CALLBACK_URL = "http://127.0.0.1:9/api/payments/callback"
    settings.PAYMENT_PROVIDER_RESEND_SECONDS = 0

    assert provider_resend_due() == 0  # the site's past charges are not posted now
    assert ProviderCharge.objects.get().acknowledged_at is not None


def stuck_then_free(api_client, held_voucher) -> tuple[list[Payment], Payment]:
    """Two due payments of a ``redis_lock`` voucher, then one of another voucher, all left
    waiting by a busy lock a resend ago."""
    busy_voucher = held_voucher(stock=2, strategy="redis_lock")
    stuck = [lost_payment(buy(api_client(), busy_voucher), age=timedelta(seconds=31)) for _ in range(2)]
    return stuck, lost_payment(buy(api_client(), held_voucher()), age=timedelta(seconds=31))


@contextmanager
def buyers_locked(payments: list[Payment]) -> Iterator[None]:
    """The payments' buyers' locks held elsewhere: their settles are refused busy."""
    locks = [
        Lock(locks_redis(), rule_scope("voucher", p.order.voucher_id, p.order.user_id), key_prefix=key_prefix())
        for p in payments
    ]
    for lock in locks:
        assert lock.acquire()
    try:
        yield
    finally:
        for lock in locks:
            lock.release()


def test_payments_that_keep_failing_first_do_not_keep_the_later_ones_waiting(api_client, held_voucher, settings):
    settings.PAYMENT_PROVIDER_RESEND_SECONDS = 30
    settings.LOCK_WAIT_SECONDS = 0.1
    stuck, later = stuck_then_free(api_client, held_voucher)
    with buyers_locked(stuck):
        assert services.payments_unapplied_confirm(size=2) == 1
    statuses = dict(Payment.objects.values_list("reference", "status"))
    assert [statuses[p.reference] for p in (*stuck, later)] == ["requested", "requested", "paid"]


def test_a_charge_whose_payment_a_busy_lock_left_waiting_stays_due_for_a_callback_url_set_later(
    api_client, held_voucher, settings
):
    lost = lost_payment(buy(api_client(), held_voucher()), age=timedelta(seconds=5))
    settings.PAYMENT_CALLBACK_URL = "http://127.0.0.1:9/api/payments/callback"
    settings.PAYMENT_PROVIDER_RESEND_SECONDS = 0

    assert provider_resend_due() == 1  # its confirmation is still to come: posted now
    assert Payment.objects.get(pk=lost.pk).status == "requested"


def test_the_beat_goes_on_from_where_its_last_run_stopped(api_client, held_voucher, settings, monkeypatch):
    """Runs cut short (one page each here, as a time limit cuts them) go round the waiting
    payments rather than starting at the same busy ones each time."""
    settings.PAYMENT_PROVIDER_RESEND_SECONDS = 30
    settings.LOCK_WAIT_SECONDS = 0.1
    monkeypatch.setattr(services, "UNAPPLIED_PAGES", 1)
    stuck, later = stuck_then_free(api_client, held_voucher)
    with buyers_locked(stuck):
        assert [services.payments_unapplied_confirm(size=1) for _ in range(3)] == [0, 0, 1]
    assert Payment.objects.get(pk=later.pk).status == "paid"
    # Past the last, the end; then round again, to the first, free now.
    assert [services.payments_unapplied_confirm(size=1) for _ in range(2)] == [0, 1]


def test_a_pay_again_that_applies_a_busy_confirmation_acknowledges_its_charge(api_client, held_voucher, settings):
    """The first pay's immediate confirm found the buyer's lock busy: 202, its charge marked
    unacknowledged. The next pay applies it (200 paid) and acknowledges it, as the beat does:
    a callback URL set later posts nothing for a charge already paid."""
    settings.LOCK_WAIT_SECONDS = 0.1
    voucher = held_voucher(stock=1, strategy="redis_lock")
    buyer = api_client()
    order_id = buy(buyer, voucher)
    with buyers_locked([Payment(order=order_row(order_id))]):
        assert pay(buyer, order_id).status_code == 202
    assert ProviderCharge.objects.get().acknowledged_at is None

    assert pay(buyer, order_id).json()["payment"] == "paid"

    assert ProviderCharge.objects.get().acknowledged_at is not None
    settings.PAYMENT_CALLBACK_URL = "http://127.0.0.1:9/api/payments/callback"
    settings.PAYMENT_PROVIDER_RESEND_SECONDS = 0
    assert provider_resend_due() == 0


@pytest.mark.parametrize(
    "failure",
    [
        OperationalError(1213, "Deadlock found when trying to get lock"),
        OperationalError(1205, "Lock wait timeout exceeded"),
        OperationalError(2006, "MySQL server has gone away"),
        StateMissing(),
        RedisConnectionError("Error connecting to redis"),
    ],
    ids=["deadlock", "lock_wait", "database_gone", "state_missing", "redis_down"],
)
def test_an_immediate_confirm_that_fails_for_now_answers_202_and_is_applied_later(
    api_client, held_voucher, monkeypatch, failure
):
    """The charge and the payment are committed before the confirm: its failure (rolled back)
    leaves the payment requested, answered 202 as a busy one is, its charge marked due; the
    next pay applies it."""
    voucher = held_voucher(stock=1)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    settle = services.hold_settle

    def fails(*args, **kwargs):
        raise failure

    monkeypatch.setattr(services, "hold_settle", fails)
    answer = pay(buyer, order_id)
    assert answer.status_code == 202, answer.content
    assert answer.json()["payment"] == "pending"
    assert Payment.objects.get().status == "requested"
    assert ProviderCharge.objects.get().acknowledged_at is None

    monkeypatch.setattr(services, "hold_settle", settle)
    assert pay(buyer, order_id).json()["payment"] == "paid"
    assert ProviderCharge.objects.count() == 1 and ProviderCharge.objects.get().acknowledged_at is not None
    assert stock_of(voucher) == 0


def test_an_immediate_confirm_that_fails_with_a_fault_is_not_answered_pending(api_client, held_voucher, monkeypatch):
    """A fault is not a confirmation to apply later: it is raised (a 500), not answered 202."""
    buyer = api_client()
    order_id = buy(buyer, held_voucher())

    def fails(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(services, "hold_settle", fails)
    with pytest.raises(ValueError):
        pay(buyer, order_id)


def test_a_refund_past_the_deadline_answers_expired_while_the_release_finds_a_dependency_down(
    api_client, held_voucher, monkeypatch
):
    """The refund is committed; the release after it fails (Redis out of reach, a deadlock):
    the pay still answers 409 ``expired``, and the expiry releases the order later."""
    voucher = held_voucher(stock=1)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    deadline_during_the_charge(monkeypatch, order_id)

    def down(*args, **kwargs):
        raise RedisConnectionError("Error connecting to redis")

    monkeypatch.setattr(services, "hold_lapse", down)
    assert_error(pay(buyer, order_id), 409, "expired")
    assert Payment.objects.get().status == "refunded"
    assert order_row(order_id).status == "held"
    assert hold_lapse(VOUCHER, order_row(order_id))
    assert order_row(order_id).status == "expired" and stock_of(voucher) == 1


def test_a_cancel_of_an_order_being_paid_is_still_an_abandoned_hold(api_client, held_voucher, provider):
    """The buyer's own cancel counts, paid or not: paying then cancelling would pass the cap."""
    provider.PAYMENT_PROVIDER_DELAY_MS = 500
    buyer = api_client()
    order_id = buy(buyer, held_voucher())
    assert pay(buyer, order_id).status_code == 202
    order_cancel(order=order_get(user=buyer.user, order_id=order_id))
    assert Abandoned.objects.get(user=buyer.user).holds == 1
