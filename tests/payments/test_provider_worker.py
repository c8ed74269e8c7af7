"""The simulated provider for real: a Celery worker posts its signed confirmations to a live
gunicorn's callback, late, twice or (lost) only when the beat sends them again, and a
confirmation that comes after the hold ended is refunded while another buyer keeps the unit.

The test's process is the web process that takes the pay (its settings say how the provider
answers each charge); the worker and the beat share its broker and its namespace."""

from __future__ import annotations

import pytest
from celery import current_app
from django.conf import settings as django_settings
from django.utils import timezone

from inventory.holds import hold_lapse
from orders.product import VOUCHER
from payments.models import Payment, ProviderCharge
from payments.selectors import payments_audit
from tests.stock import stock_left

from ..live import database_url, running_gunicorn
from ..test_reservations_worker import Worker
from ..waiting import wait_until
from .conftest import buy, order_row, pay

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]

RESEND_SECONDS = "1"


@pytest.fixture(scope="module")
def callback_url(django_db_setup, django_db_blocker, tmp_path_factory):
    """The site's callback on a live gunicorn, with a worker and a beat of the provider's."""
    broker = django_settings.CELERY_BROKER_URL
    with django_db_blocker.unblock():
        env = {
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DATABASE_URL": database_url(),
            "REDIS_URL": django_settings.REDIS_URL,
            "CELERY_BROKER_URL": broker,
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path_factory.mktemp("prometheus")),
        }
        current_app.control.purge()  # no task an earlier test left for nobody
        with running_gunicorn(env, workers=1) as base:
            url = f"{base}/api/payments/callback"
            provider = {"PAYMENT_CALLBACK_URL": url, "PAYMENT_PROVIDER_RESEND_SECONDS": RESEND_SECONDS}
            worker, beat = Worker(broker, **provider), Worker(broker, beat=True, **provider)
            worker.start()
            beat.start()
            try:
                yield url
            finally:
                beat.stop()
                worker.stop()


@pytest.fixture
def provider(settings, callback_url):
    settings.PAYMENT_CALLBACK_URL = callback_url
    settings.PAYMENT_PROVIDER_DELAY_MS = 300
    settings.PAYMENT_PROVIDER_JITTER_MS = 0
    settings.PAYMENT_PROVIDER_DUPLICATE_RATE = 0
    settings.PAYMENT_PROVIDER_LOSS_RATE = 0
    settings.PAYMENT_PROVIDER_RESEND_SECONDS = int(RESEND_SECONDS)
    return settings


def charge() -> ProviderCharge:
    return ProviderCharge.objects.get()


def test_a_late_confirmation_pays_the_order(provider, api_client, held_voucher):
    buyer = api_client()
    order_id = buy(buyer, held_voucher())
    assert pay(buyer, order_id).status_code == 202

    wait_until(
        lambda: buyer.get(f"/api/orders/{order_id}").json()["status"] == "paid", "the callback paid", 30, every=0.05
    )

    wait_until(lambda: charge().acknowledged_at is not None, "the site acknowledged it", 10)
    assert (charge().callbacks, Payment.objects.get().status) == (1, "paid")


def test_a_confirmation_sent_twice_pays_once(provider, api_client, held_voucher):
    provider.PAYMENT_PROVIDER_DUPLICATE_RATE = 1
    voucher = held_voucher(stock=1)
    buyer = api_client()
    order_id = buy(buyer, voucher)
    assert pay(buyer, order_id).status_code == 202

    wait_until(lambda: charge().acknowledgements == 2, "both callbacks answered", 30)

    assert charge().callbacks == 2
    assert (Payment.objects.get().status, order_row(order_id).status) == ("paid", "paid")
    assert stock_left(voucher) == 0
    assert payments_audit(voucher_id=voucher.pk).ok


def test_a_lost_confirmation_is_sent_again_and_resolves_the_payment(provider, api_client, held_voucher):
    provider.PAYMENT_PROVIDER_LOSS_RATE = 1
    buyer = api_client()
    order_id = buy(buyer, held_voucher())
    assert pay(buyer, order_id).status_code == 202
    assert charge().callbacks == 0  # lost: never sent

    wait_until(lambda: Payment.objects.get().status == "paid", "the resent callback paid", 30)

    assert order_row(order_id).status == "paid"
    wait_until(lambda: charge().acknowledged_at is not None, "the resend acknowledged", 10)
    assert charge().callbacks >= 1


def test_a_confirmation_after_the_hold_expired_is_refunded_and_another_buyer_keeps_the_unit(
    provider, api_client, held_voucher
):
    provider.PAYMENT_PROVIDER_DELAY_MS = 5000
    voucher = held_voucher(stock=1, window=1)
    first, second = api_client(), api_client()
    late = buy(first, voucher)
    assert pay(first, late).status_code == 202
    deadline = order_row(late).hold_until
    wait_until(lambda: timezone.now() > deadline, "the hold's deadline passed", 5)
    # The expiry's release, run now rather than waited for.
    hold_lapse(VOUCHER, order_row(late))
    assert order_row(late).status == "expired"
    provider.PAYMENT_PROVIDER_DELAY_MS = 0
    bought = buy(second, voucher)
    assert pay(second, bought).status_code == 200

    wait_until(lambda: Payment.objects.get(order_id=order_row(late).pk).status == "refunded", "the refund", 30)

    refund = Payment.objects.get(order_id=order_row(late).pk)
    assert refund.refund_reason == "expired"
    assert refund.refunded_at > order_row(bought).settled_at  # came after the other buyer paid
    assert first.get(f"/api/orders/{late}").json()["refund"]["reason"] == "expired"
    assert (order_row(late).releases, order_row(bought).status) == (1, "paid")
    assert stock_left(voucher) == 0
    audit = payments_audit(voucher_id=voucher.pk)
    assert (audit.confirmations, audit.paid, audit.refunded, audit.ok) == (2, 1, 1, True)
