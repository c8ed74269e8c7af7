"""Stock management in the Django admin goes through the guarded services."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from inventory.models import Stock
from orders.models import Voucher

pytestmark = pytest.mark.django_db


def test_restock_adds_units_through_the_service(admin_client_, make_voucher):
    voucher = make_voucher(stock=2)
    response = admin_client_.post(f"/admin/orders/voucher/{voucher.pk}/restock/", {"quantity": "3"})
    assert response.status_code == 302
    stock = Stock.objects.get(pk=voucher.stock_id)
    assert (stock.quantity, stock.initial_quantity) == (5, 5)


@pytest.mark.parametrize("quantity", ["0", "-4", "many", ""])
def test_restock_refuses_bad_quantities_and_changes_nothing(admin_client_, make_voucher, quantity):
    voucher = make_voucher(stock=2)
    response = admin_client_.post(f"/admin/orders/voucher/{voucher.pk}/restock/", {"quantity": quantity})
    assert response.status_code == 200
    assert response.context["form"].errors
    stock = Stock.objects.get(pk=voucher.stock_id)
    assert (stock.quantity, stock.initial_quantity) == (2, 2)


def test_stock_is_not_an_editable_field(admin_client_, make_voucher):
    voucher = make_voucher(stock=2)
    page = admin_client_.get(f"/admin/orders/voucher/{voucher.pk}/change/").content.decode()
    assert 'name="quantity"' not in page
    assert "supplied 2" in page


def test_add_voucher_creates_its_stock(admin_client_):
    begin = timezone.now()
    response = admin_client_.post(
        "/admin/orders/voucher/add/",
        {
            "title": "Made in admin",
            "description": "",
            "begin_at_0": begin.strftime("%Y-%m-%d"),
            "begin_at_1": begin.strftime("%H:%M:%S"),
            "end_at_0": (begin + timedelta(days=1)).strftime("%Y-%m-%d"),
            "end_at_1": begin.strftime("%H:%M:%S"),
            "strategy": "db_pessimistic",
            "initial_stock": "12",
        },
    )
    assert response.status_code == 302, response.content
    voucher = Voucher.objects.select_related("stock").get(title="Made in admin")
    assert (voucher.stock.quantity, voucher.stock.initial_quantity, voucher.strategy) == (12, 12, "db_pessimistic")


def test_a_window_that_ends_before_it_begins_is_refused(admin_client_, make_voucher):
    voucher = make_voucher()
    begin = timezone.now()
    response = admin_client_.post(
        f"/admin/orders/voucher/{voucher.pk}/change/",
        {
            "title": voucher.title,
            "description": "",
            "begin_at_0": begin.strftime("%Y-%m-%d"),
            "begin_at_1": begin.strftime("%H:%M:%S"),
            "end_at_0": (begin - timedelta(days=1)).strftime("%Y-%m-%d"),
            "end_at_1": begin.strftime("%H:%M:%S"),
            "strategy": "db_atomic",
        },
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors
