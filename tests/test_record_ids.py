"""The ids orders and draws are shown by say nothing of how many the site has: a keyed
permutation of the ids they are kept under (``inventory.records.public_of``), turned back
before every lookup, for every strategy, ``redis_lua``'s reservations included."""

from __future__ import annotations

import pytest
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from inventory.paging import Cursor
from inventory.records import ID_LIMIT, internal_of, public_of, row_filter
from inventory.redis_lua.values import reservation_id
from orders.models import Order
from orders.services import order_purchase
from tests.records import answered_row
from tests.test_redis_lua import persist_voucher

from .http import assert_error

ids = st.integers(min_value=0, max_value=ID_LIMIT - 1)


@given(ids)
def test_every_id_below_2_63_is_shown_by_one_number_below_2_63_and_turned_back_from_it(internal):
    public = public_of(internal)
    assert 0 <= public < ID_LIMIT
    assert internal_of(public) == internal


def test_ids_next_to_each_other_are_shown_by_numbers_that_keep_no_order():
    # 2,000 rows in a row, and 2,000 reservations of one state in a row: their public ids'
    # ranks are independent of their own (Spearman), and no two collide.
    for first in (1, reservation_id(7, 1)):
        internal = range(first, first + 2000)
        public = [public_of(one) for one in internal]
        assert len(set(public)) == len(public)
        assert stats.spearmanr(list(internal), public).pvalue > 1e-6
        steps = [later - earlier for earlier, later in zip(public, public[1:], strict=False)]
        # Half the steps go down, as for numbers drawn at random (a two-sided binomial test).
        assert stats.binomtest(sum(step < 0 for step in steps), len(steps)).pvalue > 1e-6


def test_another_secret_shows_every_record_by_another_number():
    shown = [public_of(one) for one in range(1, 50)]
    with override_settings(SECRET_KEY="another secret, known to this test alone, of fifty characters or more"):
        assert all(public_of(one) != was for one, was in zip(range(1, 50), shown, strict=True))
        assert [internal_of(one) for one in shown] != list(range(1, 50))


@pytest.mark.parametrize("number", [-1, ID_LIMIT, ID_LIMIT + 5])
def test_a_number_outside_the_ids_names_no_record(number):
    assert internal_of(number) is None and row_filter(number) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reservations_redis")
@pytest.mark.parametrize("strategy", ["db_atomic", "redis_lua"])
def test_an_order_is_found_by_the_number_it_was_shown_and_by_no_id_it_is_kept_under(api_client, make_voucher, strategy):
    voucher = make_voucher(stock=5, strategy=strategy)
    buyers = [api_client() for _ in range(3)]
    shown = [buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"] for buyer in buyers]
    if strategy == "redis_lua":
        persist_voucher(voucher)
    rows = [answered_row(Order, one) for one in shown]
    kept = [row.reservation or row.pk for row in rows]
    assert all(one not in kept for one in shown)
    for buyer, one, row in zip(buyers, shown, rows, strict=True):
        assert buyer.get(f"/api/orders/{one}").json()["order_id"] == one
        # The id it is kept under names nothing to its own buyer.
        assert_error(buyer.get(f"/api/orders/{row.reservation or row.pk}"), 404, "not_found")
        assert row.public_id == one
    assert_error(buyers[0].get(f"/api/orders/{ID_LIMIT}"), 404, "not_found")
    assert_error(buyers[0].get(f"/api/orders/{shown[1]}"), 404, "not_found")  # another buyer's


@pytest.mark.django_db
def test_a_cursor_carries_the_shown_id_and_reads_back_the_place_it_was_made_of(make_user, make_voucher):
    order = order_purchase(user=make_user(), voucher=make_voucher())
    cursor = Cursor.of(order)
    written = str(cursor)
    assert written.endswith(f".{order.public_id}") and not written.endswith(f".{order.pk}")
    assert Cursor.parse(written) == cursor


@pytest.mark.django_db
def test_the_admin_finds_the_record_a_buyer_quotes_by_its_number(admin_client_, make_user, make_voucher):
    orders = [order_purchase(user=make_user(), voucher=make_voucher()) for _ in range(3)]
    for order in orders:
        for typed in (str(order.public_id), f"#{order.public_id}", f" #{order.public_id} "):
            found = admin_client_.get("/admin/orders/order/", {"q": typed}).context["cl"].result_list
            assert [one.pk for one in found] == [order.pk], typed
    page = admin_client_.get("/admin/orders/order/").content.decode()
    assert all(f"#{order.public_id}" in page for order in orders)
    nothing = admin_client_.get("/admin/orders/order/", {"q": str(ID_LIMIT)}).context["cl"].result_list
    assert list(nothing) == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reservations_redis")
def test_a_redis_lua_order_answers_to_the_number_made_of_its_reservation_and_not_to_one_made_of_its_row(
    api_client, make_voucher
):
    voucher = make_voucher(stock=2, strategy="redis_lua")
    buyer = api_client()
    shown = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    persist_voucher(voucher)
    row = answered_row(Order, shown)
    assert buyer.get(f"/api/orders/{shown}").status_code == 200
    assert_error(buyer.get(f"/api/orders/{public_of(row.pk)}"), 404, "not_found")


@pytest.mark.django_db
def test_the_admin_searches_a_number_no_record_is_shown_by_as_a_username(admin_client_, make_user, make_voucher):
    order = order_purchase(user=make_user("2024"), voucher=make_voucher())
    found = admin_client_.get("/admin/orders/order/", {"q": "2024"}).context["cl"].result_list
    assert [one.pk for one in found] == [order.pk]
