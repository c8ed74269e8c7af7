"""The running totals of takes past the per-user rule (``inventory.totals``) stay what the
records say when the takes ``none`` left behind are released under a safe strategy, whether
by their buyer or by the sweep, and when the rule itself changes."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from inventory.holds import holds_expire_all
from inventory.models import Stock, StockGroup
from inventory.totals import totals_recount
from orders.models import Order
from orders.product import VOUCHER
from orders.selectors import order_get, voucher_audit, voucher_get
from orders.services import order_cancel, voucher_update
from tests.stock import stock_row

pytestmark = pytest.mark.django_db


def duplicated(make_voucher, make_user, *, due: bool = False):
    """A voucher with a payment window, and a buyer holding two orders of it, as ``none``
    leaves a buyer whose two purchases raced, its running totals with them."""
    voucher = make_voucher(stock=5, strategy="none")
    voucher_update(voucher=voucher, hold_seconds=600)
    buyer = make_user()
    until = timezone.now() + (-timedelta(seconds=1) if due else timedelta(minutes=10))
    Order.objects.bulk_create(
        Order(user=buyer, voucher=voucher, stock_id=stock_row(voucher), status=Order.Status.HELD, hold_until=until)
        for _ in range(2)
    )
    Stock.objects.filter(pk=stock_row(voucher)).update(quantity=3)
    totals_recount(VOUCHER, item_ids=[voucher.pk])
    group = StockGroup.objects.get(pk=voucher.group_id)
    assert (group.over_takes, group.over_takers) == (1, 1)
    return voucher_get(voucher_id=voucher.pk), buyer


@pytest.mark.parametrize("strategy", ["none", "db_atomic", "db_pessimistic", "db_optimistic", "redis_lock"])
def test_a_duplicate_cancelled_under_any_strategy_leaves_the_totals_true(strategy, make_voucher, make_user):
    voucher, buyer = duplicated(make_voucher, make_user)
    voucher_update(voucher=voucher, strategy=strategy)
    order_cancel(order=order_get(user=buyer, order_id=Order.objects.filter(user=buyer).first().public_id))
    audit = voucher_audit(voucher_id=voucher.pk)
    assert (audit.duplicates, audit.totals_agree) == (0, True), audit
    group = StockGroup.objects.get(pk=voucher.group_id)
    assert (group.over_takes, group.over_takers) == (0, 0)


@pytest.mark.parametrize("strategy", ["db_atomic", "redis_lock"])
def test_duplicates_expired_by_the_sweep_leave_the_totals_true(strategy, make_voucher, make_user):
    voucher, _ = duplicated(make_voucher, make_user, due=True)
    voucher_update(voucher=voucher, strategy=strategy)
    assert holds_expire_all(VOUCHER, item_id=voucher.pk) == 2
    audit = voucher_audit(voucher_id=voucher.pk)
    assert (audit.duplicates, audit.holds.released, audit.totals_agree) == (0, 2, True), audit


def test_the_recount_command_sets_drifted_totals_right_and_names_how_many(make_voucher, make_pool, make_user):
    voucher, _ = duplicated(make_voucher, make_user)
    pool = make_pool(prizes=(("Gold", 3),))
    StockGroup.objects.filter(pk=voucher.group_id).update(over_takes=7, over_takers=7)
    Stock.objects.filter(pk=stock_row(voucher)).update(taken=0)
    assert not voucher_audit(voucher_id=voucher.pk).totals_agree
    out = io.StringIO()
    call_command("totals_recount", "--voucher", str(voucher.pk), "--pool", str(pool.pk), stdout=out)
    assert out.getvalue().strip() == "1 item had totals to set right."
    assert voucher_audit(voucher_id=voucher.pk).totals_agree
    call_command("totals_recount", stdout=out)
    assert out.getvalue().strip().endswith("0 items had totals to set right.")
