"""``db_optimistic`` when a take read before its item was split meets a take of a bucket: the
first compares the group's version, which a bucket's take does not bump, and wrote its row
below zero (the buyer told sold out while another bucket had stock)."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from inventory.buckets import home_bucket
from inventory.models import Stock
from orders.selectors import voucher_get
from orders.services import order_purchase

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_take_read_before_a_split_takes_the_unit_left_in_another_bucket(make_voucher, make_user):
    voucher = make_voucher(stock=2, strategy="db_optimistic", buckets=2)
    rows = list(Stock.objects.filter(group_id=voucher.group_id).order_by("bucket").values_list("pk", flat=True))
    stale = voucher_get(voucher_id=voucher.pk)
    stale.buckets = 1  # as read just before the split was committed
    early = make_user()
    late = next(user for user in iter(make_user, None) if home_bucket(user.pk, 2) == 0)
    about_to_write, go, answers = threading.Event(), threading.Event(), {}

    def paused_before_its_write(execute, sql, params, many, context):
        if sql.startswith("UPDATE `inventory_stockgroup`") and not about_to_write.is_set():
            about_to_write.set()
            go.wait(30)
        return execute(sql, params, many, context)

    def take_read_before_the_split() -> None:
        try:
            with connection.execute_wrapper(paused_before_its_write):
                answers["early"] = order_purchase(user=get_user_model()(pk=early.pk), voucher=stale).stock_id
        except Exception as exc:  # noqa: BLE001  (the answer the test reads)
            answers["early"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=take_read_before_the_split)
    thread.start()
    try:
        assert about_to_write.wait(30), answers  # it chose bucket 0's row, the first with stock
        assert order_purchase(user=late, voucher=voucher_get(voucher_id=voucher.pk)).stock_id == rows[0]
    finally:
        go.set()
        thread.join(30)
    assert answers["early"] == rows[1], answers
    assert list(Stock.objects.filter(pk__in=rows).order_by("bucket").values_list("quantity", flat=True)) == [0, 0]
