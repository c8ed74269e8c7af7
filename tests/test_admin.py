"""Stock management in the Django admin goes through the guarded services."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from inventory.models import Stock
from orders.models import Voucher
from tests.restock import fresh_once
from tests.stock import stock_left, stock_row, stock_supplied

pytestmark = pytest.mark.django_db


def test_restock_adds_units_through_the_service(admin_client_, make_voucher):
    voucher = make_voucher(stock=2)
    response = admin_client_.post(
        f"/admin/orders/voucher/{voucher.pk}/restock/", {"quantity": "3", "once": fresh_once()}
    )
    assert response.status_code == 302
    stock = Stock.objects.get(pk=stock_row(voucher))
    assert (stock.quantity, stock.initial_quantity) == (5, 5)


@pytest.mark.parametrize("quantity", ["0", "-4", "many", ""])
def test_restock_refuses_bad_quantities_and_changes_nothing(admin_client_, make_voucher, quantity):
    voucher = make_voucher(stock=2)
    response = admin_client_.post(
        f"/admin/orders/voucher/{voucher.pk}/restock/", {"quantity": quantity, "once": fresh_once()}
    )
    assert response.status_code == 200
    assert response.context["form"].errors
    stock = Stock.objects.get(pk=stock_row(voucher))
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
    voucher = Voucher.objects.get(title="Made in admin")
    assert (stock_left(voucher), stock_supplied(voucher), voucher.strategy) == (12, 12, "db_pessimistic")


def window_form(begin, end, **fields) -> dict:
    return {
        "description": "",
        "begin_at_0": begin.strftime("%Y-%m-%d"),
        "begin_at_1": begin.strftime("%H:%M:%S"),
        "end_at_0": end.strftime("%Y-%m-%d"),
        "end_at_1": end.strftime("%H:%M:%S"),
        "strategy": "db_atomic",
        **fields,
    }


@pytest.mark.parametrize("page", ["change", "add"])
def test_a_window_that_ends_before_it_begins_is_refused_with_a_message(admin_client_, make_voucher, page):
    voucher = make_voucher(title="Kept")
    begin = timezone.now()
    url = f"/admin/orders/voucher/{voucher.pk}/change/" if page == "change" else "/admin/orders/voucher/add/"
    response = admin_client_.post(url, window_form(begin, begin - timedelta(days=1), title="Moved", initial_stock="3"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    # On the end field, in words: not the database constraint's name.
    assert errors == {"end_at": ["The end must be after the begin."]}
    assert "voucher_window_ordered" not in response.content.decode()
    assert list(Voucher.objects.values_list("title", flat=True)) == ["Kept"]


def test_the_voucher_list_shows_stock_window_strategy_and_restock_in_few_columns(admin_client_, make_voucher):
    voucher = make_voucher(stock=4, strategy="db_pessimistic")
    page = admin_client_.get("/admin/orders/voucher/").content.decode()
    assert '<td class="field-stock_left_of_supplied">4 / 4</td>' in page
    assert '<td class="field-window">live: ' in page
    assert '<td class="field-strategy_name">db_pessimistic</td>' in page
    assert f'href="/admin/orders/voucher/{voucher.pk}/restock/"' in page


def test_the_restock_page_leads_back_through_its_breadcrumbs(admin_client_, make_voucher):
    voucher = make_voucher(title="Crumbs")
    page = admin_client_.get(f"/admin/orders/voucher/{voucher.pk}/restock/").content.decode()
    crumbs = page[page.index('<div class="breadcrumbs">') :]
    crumbs = crumbs[: crumbs.index("</div>")]
    assert 'href="/admin/"' in crumbs
    assert 'href="/admin/orders/"' in crumbs
    assert 'href="/admin/orders/voucher/"' in crumbs
    assert f'href="/admin/orders/voucher/{voucher.pk}/change/">Crumbs</a>' in crumbs
    assert "Restock" in crumbs


# What the services refuse (InvalidInput, InvalidQuantity) is refused by the form first, on its
# field: raised in save_model, after the form was valid, it answered 500.
@pytest.mark.parametrize(
    ("page", "field", "fields"),
    [
        ("add", "begin_at", {"begin_at_0": "0001-01-01", "begin_at_1": "00:00:00", "initial_stock": "3"}),
        ("change", "begin_at", {"begin_at_0": "0001-01-01", "begin_at_1": "00:00:00"}),
        ("add", "initial_stock", {"initial_stock": "2147483648"}),
    ],
)
def test_what_the_services_refuse_is_a_form_error_not_a_500(admin_client_, make_voucher, page, field, fields):
    voucher = make_voucher(title="Kept")
    begin = timezone.now()
    url = f"/admin/orders/voucher/{voucher.pk}/change/" if page == "change" else "/admin/orders/voucher/add/"
    data = window_form(begin, begin + timedelta(days=1), title="Moved", initial_stock="3") | fields
    response = admin_client_.post(url, data)
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == [field]
    assert list(Voucher.objects.values_list("title", flat=True)) == ["Kept"]


def test_the_vouchers_change_page_leads_to_its_restock(admin_client_, make_voucher):
    voucher = make_voucher(stock=5)
    page = admin_client_.get(reverse("admin:orders_voucher_change", args=[voucher.pk])).content.decode()
    restock = reverse("admin:orders_voucher_restock", args=[voucher.pk])
    assert f'<a href="{restock}" class="button" data-testid="restock">Restock</a>' in page
    assert admin_client_.get(restock).status_code == 200


def test_records_are_read_only_and_never_deleted_in_the_admin(admin_client_, make_voucher, make_pool, make_user):
    """A record is changed by the services alone: saved from its page, it wrote every column
    back as read, over a release committed meanwhile; deleted, it gave back no unit."""
    from lottery.services import pool_draw
    from orders.services import order_purchase
    from tests.stock import stock_left

    voucher, pool = make_voucher(stock=3), make_pool(prizes=(("Gold", 2),))
    order = order_purchase(user=make_user(), voucher=voucher)
    draw = pool_draw(user=make_user(), pool=pool)
    for record, path in ((order, "orders/order"), (draw, "lottery/draw")):
        page = admin_client_.get(f"/admin/{path}/{record.pk}/change/")
        assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
        assert admin_client_.post(f"/admin/{path}/{record.pk}/change/", {}).status_code == 403
        assert admin_client_.post(f"/admin/{path}/{record.pk}/delete/", {"post": "yes"}).status_code == 403
        listed = admin_client_.post(
            f"/admin/{path}/", {"action": "delete_selected", "_selected_action": [record.pk], "post": "yes"}
        )
        assert listed.status_code in (200, 302)
        assert type(record).objects.filter(pk=record.pk).exists()
    assert stock_left(voucher) == 2
    # An item is kept too: its records name it, and waiting reservations may.
    assert admin_client_.post(f"/admin/orders/voucher/{voucher.pk}/delete/", {"post": "yes"}).status_code == 403
    assert admin_client_.post(f"/admin/lottery/pool/{pool.pk}/delete/", {"post": "yes"}).status_code == 403


def test_a_restock_form_sent_twice_adds_once(admin_client_, make_voucher):
    """A restock adds: the same form sent again (a second click while a take holds the row)
    added its units again. Its page's one-time field lets the first in and refuses the second,
    with a fresh one to send it again on purpose."""
    voucher = make_voucher(stock=2)
    url = f"/admin/orders/voucher/{voucher.pk}/restock/"
    page = admin_client_.get(url).content.decode()
    once = re.search(r'name="once" value="([^"]+)"', page).group(1)
    assert admin_client_.post(url, {"quantity": "3", "once": once}).status_code == 302
    again = admin_client_.post(url, {"quantity": "3", "once": once})
    assert again.status_code == 200 and "sent already" in again.content.decode()
    assert stock_left(voucher) == 5
    fresh = again.context["form"]["once"].value()
    assert fresh != once and admin_client_.post(url, {"quantity": "3", "once": fresh}).status_code == 302
    assert stock_left(voucher) == 8
