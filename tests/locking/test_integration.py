"""The Django side: the lock connection check, the lock client and fenced writes."""

from __future__ import annotations

import pytest
from django.db.models import F

from inventory.models import Stock
from locking import CountingMetrics, StaleFence
from locking.integration import FencedUpdate, fenced_update, lock_client, lock_connection_check


def test_the_check_passes_against_a_real_redis(settings):
    settings.LOCK_REDIS_URLS = []
    assert lock_connection_check(None) == []


def test_the_check_names_a_lock_server_that_does_not_answer(settings):
    settings.LOCK_REDIS_URL = "redis://127.0.0.1:1/0"
    settings.LOCK_REDIS_URLS = []
    [error] = lock_connection_check(None)
    assert error.id == "locking.E002"


def test_the_check_refuses_a_url_that_is_not_redis(settings):
    settings.LOCK_REDIS_URLS = ["http://127.0.0.1:6379"]
    assert [e.id for e in lock_connection_check(None)] == ["locking.E001"]


def test_the_lock_client_is_one_per_url_and_process(settings):
    assert lock_client() is lock_client()
    assert lock_client("redis://127.0.0.1:6379/13") is not lock_client()


# --- fenced writes ----------------------------------------------------------------------------


class Holder:
    """What a fenced write needs of a lock: its fence (and, optionally, metrics)."""

    def __init__(self, fence: int) -> None:
        self.fence = fence
        self.label = "stock"
        self.metrics = CountingMetrics()


@pytest.mark.django_db
def test_a_prepared_update_writes_with_the_fence_of_the_holder_that_runs_it(make_voucher):
    voucher = make_voucher(stock=5)
    update = FencedUpdate(
        Stock.objects.filter(pk=voucher.stock_id, quantity__gte=2), quantity=F("quantity") - 2, version=F("version") + 1
    )
    assert update.run(Holder(fence=7)) == 1
    assert update.run(Holder(fence=8)) == 1  # prepared once, run by each holder in turn
    stock = Stock.objects.get(pk=voucher.stock_id)
    assert (stock.quantity, stock.version, stock.fence) == (1, 2, 8)


@pytest.mark.django_db
def test_a_prepared_update_leaves_rows_that_fail_its_own_conditions(make_voucher):
    voucher = make_voucher(stock=1)
    update = FencedUpdate(Stock.objects.filter(pk=voucher.stock_id, quantity__gte=2), quantity=F("quantity") - 2)
    assert update.run(Holder(fence=3)) == 0  # not written, and not stale either
    stock = Stock.objects.get(pk=voucher.stock_id)
    assert (stock.quantity, stock.fence) == (1, 0)


@pytest.mark.django_db
def test_a_stale_holder_is_refused_and_writes_nothing(make_voucher):
    voucher = make_voucher(stock=5)
    update = FencedUpdate(Stock.objects.filter(pk=voucher.stock_id), quantity=F("quantity") - 1)
    update.run(Holder(fence=10))
    stale = Holder(fence=9)
    with pytest.raises(StaleFence):
        update.run(stale)
    with pytest.raises(StaleFence):
        fenced_update(Stock.objects.filter(pk=voucher.stock_id), lock=Holder(fence=10), quantity=0)
    assert stale.metrics.counts["stale_fence"] == 1
    stock = Stock.objects.get(pk=voucher.stock_id)
    assert (stock.quantity, stock.fence) == (4, 10)
