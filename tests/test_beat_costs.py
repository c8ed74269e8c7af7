"""What each beat task costs does not grow with the records a site holds: the same queries
with 10 records as with 1,000, with nothing to do and with work to do, and on MariaDB no
query that reads the whole orders, draws or charges table (EXPLAIN of what each ran).

The beat's tasks (``CELERY_BEAT_SCHEDULE``): ``reservations_reconcile``, ``reservations_sweep``,
``reservations_close`` and ``holds_sweep`` per kind, the provider's ``provider_resend``, and the site's
``payments_unapplied_confirm`` (with no callback URL, where it works)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from inventory.models import Stock
from inventory.redis_lua.client import reservations_client
from inventory.tasks import holds_sweep, reservations_close, reservations_reconcile, reservations_sweep
from lottery.services import pool_update
from orders.models import Order
from orders.services import voucher_update
from payments.models import Payment
from payments.provider import provider_resend_due
from payments.services import payments_unapplied_confirm
from tests.stock import stock_row

from . import records

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("reservations_redis")]

# The tables that grow with a site's history: a query of a beat task may read a range of
# one through an index, never the whole of it.
HISTORY = ("orders_order", "lottery_draw", "payments_providercharge", "payments_payment", "auth_user")


def queries(action: Callable[[], object]) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        action()
    return [query["sql"] for query in captured.captured_queries]


def full_scans(sql: str) -> list[str]:
    """The tables of ``HISTORY`` that MariaDB's plan for ``sql`` reads whole."""
    if not sql.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
        return []
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        names = [column[0] for column in cursor.description]
        plan = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return [step["table"] for step in plan if step["table"] in HISTORY and step["type"] == "ALL"]


class Site:
    """A redis_lua voucher and pool live, a redis_lua voucher of 4 buckets (a state each)
    live, an ended voucher and pool (history), and the provider's charges: acknowledged, and
    sent a moment ago (none due)."""

    def __init__(self, make_voucher, make_pool, settings) -> None:
        settings.PAYMENT_CALLBACK_URL = "http://127.0.0.1:9/api/payments/callback"
        self.voucher = make_voucher(stock=5000)
        self.bucketed = make_voucher(stock=5000, buckets=4)
        self.pool = make_pool(prizes=(("Gold", 5),), draws_per_user=2, no_prize_weight=1)
        self.old_voucher = make_voucher(stock=1, starts_in=-timedelta(days=2), lasts=timedelta(days=1))
        self.old_pool = make_pool(prizes=(("Gold", 1),), starts_in=-timedelta(days=2), lasts=timedelta(days=1))
        self.size = 0

    def grow(self, size: int) -> None:
        """As many orders, draws and charges of each kind as ``size``, the live items' Redis
        state loaded from them again (switched away and back)."""
        more = size - self.size
        self.voucher = voucher_update(voucher=self.voucher, strategy="db_atomic")
        self.pool = pool_update(pool=self.pool, strategy="db_atomic")
        self.bucketed = voucher_update(voucher=self.bucketed, strategy="db_atomic")
        for item in (self.voucher, self.old_voucher):
            records.orders(item, more)
        records.orders(self.bucketed, more, row=Stock.objects.filter(group_id=self.bucketed.group_id).first().pk)
        for item in (self.pool, self.old_pool):
            records.draws(item, more)
        records.charges(more, sent_at=timezone.now() - timedelta(days=1), acknowledged=True)
        records.charges(more, sent_at=timezone.now())
        paid = Order.objects.filter(voucher=self.old_voucher).order_by("-pk")[:more]
        Payment.objects.bulk_create(
            Payment(order=order, reference=f"paid-{order.pk}", status="paid", settled_at=timezone.now())
            for order in paid
        )
        self.voucher = voucher_update(voucher=self.voucher, strategy="redis_lua")
        self.pool = pool_update(pool=self.pool, strategy="redis_lua")
        self.bucketed = voucher_update(voucher=self.bucketed, strategy="redis_lua")
        self.size = size
        for kind in ("voucher", "pool"):
            reservations_reconcile(kind)  # each user compared once: the totals stand in after

    def drift(self) -> None:
        """A unit too many in the voucher's Redis state: the next reconciliation compares
        each user and repairs it."""
        reservations_client().add_units(group_id=self.voucher.group_id, stock_id=stock_row(self.voucher), units=1)

    def tasks(self) -> dict[str, Callable[[], object]]:
        return {
            "reconcile voucher": lambda: reservations_reconcile("voucher"),
            "reconcile pool": lambda: reservations_reconcile("pool"),
            "reconcile voucher, drifted": lambda: (self.drift(), reservations_reconcile("voucher")),
            "reservations sweep voucher": lambda: reservations_sweep("voucher"),
            "reservations sweep pool": lambda: reservations_sweep("pool"),
            "reservations close voucher": lambda: reservations_close("voucher"),
            "reservations close pool": lambda: reservations_close("pool"),
            "holds sweep voucher": lambda: holds_sweep("voucher"),
            "holds sweep pool": lambda: holds_sweep("pool"),
            "resend, none due": provider_resend_due,
            "unapplied confirm, none due": override_settings(PAYMENT_CALLBACK_URL="")(payments_unapplied_confirm),
        }


@pytest.fixture
def site(make_voucher, make_pool, settings) -> Site:
    return Site(make_voucher, make_pool, settings)


def test_every_beat_task_makes_as_many_queries_with_1000_records_as_with_10(site):
    site.grow(10)
    small = {name: len(queries(task)) for name, task in site.tasks().items()}
    site.grow(1000)
    big = {name: len(queries(task)) for name, task in site.tasks().items()}
    assert big == small


@pytest.mark.skipif(connection.vendor != "mysql", reason="EXPLAIN's plan is MariaDB's")
def test_no_beat_task_reads_a_whole_table_of_records(site):
    site.grow(1000)
    for name, task in site.tasks().items():
        for sql in queries(task):
            assert not full_scans(sql), (name, sql)


def test_the_resend_costs_the_same_queries_per_batch_with_10_or_1000_due(settings):
    settings.PAYMENT_CALLBACK_URL = "http://127.0.0.1:9/api/payments/callback"
    settings.PAYMENT_PROVIDER_RESEND_SECONDS = 30
    an_hour_ago = timezone.now() - timedelta(hours=1)
    records.charges(10, sent_at=an_hour_ago)
    one_batch = queries(lambda: provider_resend_due(batch=10, batches=1))
    records.charges(1000, sent_at=an_hour_ago)
    assert len(queries(lambda: provider_resend_due(batch=10, batches=1))) == len(one_batch)
    three_batches = queries(lambda: provider_resend_due(batch=10, batches=3))
    assert len(three_batches) == 3 * len(one_batch)
    if connection.vendor == "mysql":
        for sql in one_batch + three_batches:
            assert not full_scans(sql), sql


def test_every_task_the_beat_schedules_is_one_the_worker_knows(settings):
    from config.celery import app

    app.loader.import_default_modules()
    scheduled = [entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()]
    assert "payments.tasks.unapplied_confirm" in scheduled
    assert [name for name in scheduled if name not in app.tasks] == []
