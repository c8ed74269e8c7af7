"""Staff and the lifecycle: the voucher's and the pool's admin forms take the hold window
(the payment window, the claim window), checked as the services check it; ``manage.py
audit`` and the voucher's admin page count the payments beside the orders."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from lottery.models import Pool
from orders.models import Order, Voucher
from orders.selectors import order_get
from orders.services import order_cancel, order_purchase
from payments.models import Payment
from payments.selectors import payments_audit
from payments.services import order_pay, payment_confirm
from tests.lottery.test_admin import pool_form
from tests.test_admin import window_form

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("payment_provider")]


def voucher_form(**fields) -> dict:
    begin = timezone.now()
    return window_form(begin, begin + timedelta(days=1), title="Held in admin", initial_stock="3") | fields


def test_the_voucher_forms_take_the_payment_window(admin_client_):
    page = admin_client_.get("/admin/orders/voucher/add/").content.decode()
    assert "Payment window (seconds)" in page
    assert admin_client_.post("/admin/orders/voucher/add/", voucher_form(hold_seconds="900")).status_code == 302
    voucher = Voucher.objects.get(title="Held in admin")
    assert voucher.hold_seconds == 900
    change = f"/admin/orders/voucher/{voucher.pk}/change/"
    assert "Payment window (seconds)" in admin_client_.get(change).content.decode()
    assert admin_client_.post(change, voucher_form(hold_seconds="60")).status_code == 302
    assert Voucher.objects.get(pk=voucher.pk).hold_seconds == 60
    # A form posted without it keeps the window; a new voucher gets none.
    assert admin_client_.post(change, voucher_form()).status_code == 302
    assert Voucher.objects.get(pk=voucher.pk).hold_seconds == 60
    assert admin_client_.post("/admin/orders/voucher/add/", voucher_form(title="No window")).status_code == 302
    assert Voucher.objects.get(title="No window").hold_seconds == 0


@pytest.mark.parametrize("seconds", ["86401", "-1", "an hour"])
def test_a_payment_window_the_services_refuse_is_a_form_error(admin_client_, make_voucher, seconds):
    voucher = make_voucher(title="Kept")
    for url in ("/admin/orders/voucher/add/", f"/admin/orders/voucher/{voucher.pk}/change/"):
        response = admin_client_.post(url, voucher_form(hold_seconds=seconds))
        assert response.status_code == 200
        assert list(response.context["adminform"].form.errors) == ["hold_seconds"]
        if seconds != "an hour":  # not a number: the form field's own "Enter a whole number."
            error = response.context["adminform"].form.errors["hold_seconds"][0]
            assert error == "Payment window (seconds) must be a whole number from 0 to 86,400.", error
    assert list(Voucher.objects.values_list("title", "hold_seconds")) == [("Kept", 0)]


def test_the_pool_forms_take_the_claim_window(admin_client_):
    begin = timezone.now()
    assert "Claim window (seconds)" in admin_client_.get("/admin/lottery/pool/add/").content.decode()
    response = admin_client_.post(
        "/admin/lottery/pool/add/", pool_form(begin, begin + timedelta(days=1), hold_seconds="600")
    )
    assert response.status_code == 302, response.content.decode()[-3000:]
    pool = Pool.objects.get(name="Admin pool")
    assert pool.hold_seconds == 600
    refused = admin_client_.post(
        "/admin/lottery/pool/add/", pool_form(begin, begin + timedelta(days=1), name="Too long", hold_seconds="86401")
    )
    assert refused.status_code == 200
    # In the words of the field's label: the pool's hold window is its claim window.
    assert "Claim window (seconds) must be a whole number from 0 to 86,400." in refused.content.decode()
    assert "Hold window" not in refused.content.decode()
    assert not Pool.objects.filter(name="Too long").exists()


def paid_and_refunded(make_user, make_voucher, payment_provider) -> Voucher:
    """A voucher with one order paid and one whose payment came after its cancel: refunded."""
    voucher = make_voucher(stock=3)
    Voucher.objects.filter(pk=voucher.pk).update(hold_seconds=600)
    voucher.refresh_from_db()
    payer, late = make_user(), make_user()
    order_pay(order=order_get(user=payer, order_id=order_purchase(user=payer, voucher=voucher).public_id))
    payment_provider.PAYMENT_PROVIDER_DELAY_MS = 500
    order = order_purchase(user=late, voucher=voucher)
    order_pay(order=order_get(user=late, order_id=order.public_id))
    order_cancel(order=order_get(user=late, order_id=order.public_id))
    payment_confirm(reference=Payment.objects.get(order=order).reference)
    return voucher


def test_manage_audit_counts_a_vouchers_payments(make_user, make_voucher, payment_provider, capsys):
    voucher = paid_and_refunded(make_user, make_voucher, payment_provider)
    call_command("audit", "--voucher", str(voucher.pk))
    header, row, summary = capsys.readouterr().out.splitlines()
    assert header.split()[12:16] == ["confirmations", "pay_paid", "refunded", "payments_ok"]
    assert row.split()[12:16] == ["2", "1", "1", "yes"]
    assert summary == "1 vouchers, 0 pools, 0 broken."
    call_command("audit", "--voucher", str(voucher.pk), "--json")
    payments = json.loads(capsys.readouterr().out)["vouchers"][0]["payments"]
    assert (payments["confirmations"], payments["paid"], payments["refunded"], payments["ok"]) == (2, 1, 1, True)
    # A paid payment whose order is not paid (as a lost update would leave it): the voucher is broken.
    Order.objects.filter(voucher=voucher, status=Order.Status.PAID).update(status=Order.Status.HELD)
    with pytest.raises(SystemExit):
        call_command("audit", "--voucher", str(voucher.pk))
    assert "BROKEN" in capsys.readouterr().out


def test_the_vouchers_admin_page_links_its_payments_audit_which_runs_on_demand(
    admin_client_, make_user, make_voucher, payment_provider
):
    voucher = paid_and_refunded(make_user, make_voucher, payment_provider)
    change = f"/admin/orders/voucher/{voucher.pk}/change/"
    audit = f"/admin/orders/voucher/{voucher.pk}/payments-audit/"
    with CaptureQueriesContext(connection) as captured:
        page = admin_client_.get(change).content.decode()
    assert "held 0" in page  # the orders' audit is on the page
    assert f'<a href="{audit}">Audit the payments</a>' in page
    assert not [q for q in captured.captured_queries if "payments_" in q["sql"]]
    page = admin_client_.get(audit).content.decode()
    assert "payments: confirmations 2 · paid 1 · refunded 1 · waiting 0" in page
    assert "<strong>OK</strong>" in page
    assert f'href="{change}">{voucher.title}</a>' in page  # the breadcrumbs lead back
    plain = make_voucher(title="Not paid through the provider")
    page = admin_client_.get(f"/admin/orders/voucher/{plain.pk}/payments-audit/").content.decode()
    assert "payments: confirmations 0" in page and "<strong>none yet</strong>" in page


def test_the_payments_audit_is_for_staff_who_may_see_the_voucher(client, make_user, make_voucher):
    voucher = make_voucher()
    audit = f"/admin/orders/voucher/{voucher.pk}/payments-audit/"
    client.force_login(make_user())
    assert client.get(audit).status_code == 302  # to the admin's login
    client.force_login(make_user(staff=True, permissions=()))
    assert client.get(audit).status_code == 403
    client.force_login(make_user(staff=True, permissions=("orders.view_voucher",)))
    assert client.get(audit).status_code == 200


def test_manage_audit_keeps_each_vouchers_payments_apart(make_user, make_voucher, payment_provider, capsys):
    """The payments of every voucher are counted in one grouped pass: a break in one voucher
    shows on its row alone, and the audit of all orders is the sum of the vouchers'."""
    first = paid_and_refunded(make_user, make_voucher, payment_provider)
    payment_provider.PAYMENT_PROVIDER_DELAY_MS = 0
    second = paid_and_refunded(make_user, make_voucher, payment_provider)
    Order.objects.filter(voucher=second, status=Order.Status.PAID).update(status=Order.Status.HELD)
    with pytest.raises(SystemExit):
        call_command("audit", "--json")
    vouchers = {v["voucher_id"]: v for v in json.loads(capsys.readouterr().out)["vouchers"]}
    assert (vouchers[first.pk]["payments"]["paid_unsold"], vouchers[first.pk]["ok"]) == (0, True)
    assert (vouchers[second.pk]["payments"]["paid_unsold"], vouchers[second.pk]["ok"]) == (1, False)
    every = payments_audit()
    assert (every.confirmations, every.paid, every.refunded, every.paid_unsold) == (4, 2, 2, 1)
