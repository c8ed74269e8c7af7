"""The shop's lists of sales and pools (the pages, polled by every open tab, and the API's)
show the sales on now, to come, and ended within a day: not every sale there ever was."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from inventory.items import SHOWN_AFTER_END
from inventory.models import StockGroup
from orders.models import Voucher
from tests.plans import analyze, assert_no_full_scan


def ended(item, ago: timedelta) -> None:
    """``item``'s sale as one that ended ``ago`` (its window moved back whole)."""
    end = timezone.now() - ago
    type(item).objects.filter(pk=item.pk).update(begin_at=end - timedelta(hours=1), end_at=end)


@pytest.mark.django_db
def test_a_sale_ended_more_than_a_day_ago_leaves_the_lists_and_keeps_its_page(client, make_voucher, make_pool):
    on, recent, old = make_voucher(title="On now"), make_voucher(title="Ended an hour ago"), make_voucher(title="Ended")
    ended(recent, timedelta(hours=1))
    ended(old, SHOWN_AFTER_END + timedelta(minutes=1))
    pool_on, pool_old = make_pool(name="Drawing now"), make_pool(name="Drawn long ago")
    ended(pool_old, SHOWN_AFTER_END + timedelta(minutes=1))
    listed = {one["id"] for one in client.get("/api/vouchers").json()}
    assert listed == {on.pk, recent.pk}
    assert {one["id"] for one in client.get("/api/pools").json()} == {pool_on.pk}
    rows = client.get(reverse("pages:voucher_list")).content.decode()
    assert "On now" in rows and "Ended an hour ago" in rows and "Ended<" not in rows
    assert "Drawn long ago" not in client.get(reverse("lottery:pool_list")).content.decode()
    assert client.get(f"/api/vouchers/{old.pk}").status_code == 200
    assert client.get(reverse("pages:voucher_detail", args=[old.pk])).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_list_reads_the_sales_on_show_not_every_sale_there_ever_was(client, make_voucher):
    """Behind 3,000 sales ended long ago, the list reads a range of (listed, end)."""
    shown = make_voucher(title="On now")
    template = Voucher.objects.get(pk=shown.pk)
    long_ago = timezone.now() - timedelta(days=30)
    groups = StockGroup.objects.bulk_create(StockGroup() for _ in range(3000))
    fields = {f.attname: getattr(template, f.attname) for f in Voucher._meta.concrete_fields if not f.primary_key}
    Voucher.objects.bulk_create(
        Voucher(**(fields | {"group_id": group.pk, "begin_at": long_ago, "end_at": long_ago + timedelta(hours=1)}))
        for group in groups
    )
    analyze("orders_voucher")
    with CaptureQueriesContext(connection) as captured:
        assert [one["id"] for one in client.get("/api/vouchers").json()] == [shown.pk]
    assert_no_full_scan(captured, tables=["orders_voucher"])
