"""The admin's page of a record is titled with its item's and its user's names: "Order 6 of 2
by 1" named them by their ids."""

from __future__ import annotations

import pytest
from django.urls import reverse

from lottery.services import pool_draw
from orders.services import order_purchase

pytestmark = pytest.mark.django_db


def test_order_and_draw_pages_are_titled_with_names_not_ids(admin_client_, make_user, make_voucher, make_pool):
    order = order_purchase(user=make_user("ana"), voucher=make_voucher(title="Spring sale"))
    page = admin_client_.get(reverse("admin:orders_order_change", args=[order.pk])).content.decode()
    assert f"<h2>Order {order.public_id} of Spring sale by ana</h2>" in page
    draw = pool_draw(user=make_user("ben"), pool=make_pool(name="Summer pool"))
    page = admin_client_.get(reverse("admin:lottery_draw_change", args=[draw.pk])).content.decode()
    assert f"<h2>Draw {draw.public_id} in Summer pool by ben</h2>" in page
