"""What the staff's pages and ``manage.py audit`` cost grows with what they show, not with
the records a site has ever had: the same queries for 10 records as for 1,000, the same
for three items as for one, and on MariaDB, the order and draw lists read their page from
an index rather than every record."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.admin import AtLeast, CappedPaginator
from inventory.totals import totals_recount
from orders.models import Order
from orders.product import VOUCHER
from tests.plans import analyze, assert_no_full_scan, full_scans, insert_series
from tests.stock import stock_row

pytestmark = pytest.mark.django_db

USERS = 50


def add_users(prefix: str) -> None:
    insert_series(
        "auth_user",
        USERS,
        {
            "username": f"CONCAT('{prefix}-', seq)",
            "password": "'!'",
            "first_name": "''",
            "last_name": "''",
            "email": "''",
            "is_superuser": "0",
            "is_staff": "0",
            "is_active": "1",
            "date_joined": "NOW(6)",
        },
    )


def user_of(prefix: str) -> str:
    """The id of one of the users ``add_users(prefix)`` made, by ``seq``."""
    return f"(SELECT id FROM auth_user WHERE username = CONCAT('{prefix}-', MOD(seq, {USERS}) + 1))"


def add_orders(voucher, count: int, prefix: str) -> None:
    """``count`` orders of ``voucher`` in every status, the paid ones paid through the
    provider (a payment and its charge each)."""
    insert_series(
        "orders_order",
        count,
        {
            "voucher_id": str(voucher.pk),
            "stock_id": str(stock_row(voucher)),
            "user_id": user_of(prefix),
            "status": "ELT(MOD(seq, 5) + 1, 'confirmed', 'held', 'paid', 'cancelled', 'expired')",
            "hold_until": "IF(MOD(seq, 5) = 0, NULL, NOW(6) + INTERVAL 1 HOUR)",
            "settled_at": "IF(MOD(seq, 5) = 2, NOW(6), NULL)",
            "released_at": "IF(MOD(seq, 5) > 2, NOW(6), NULL)",
            "releases": "IF(MOD(seq, 5) > 2, 1, 0)",
            "created_at": "NOW(6) - INTERVAL seq SECOND",
        },
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO payments_payment (order_id, reference, status, settled_at, created_at, refund_reason)"
            " SELECT id, CONCAT('ref-', id), 'paid', NOW(6), NOW(6), '' FROM orders_order"
            " WHERE voucher_id = %s AND status = 'paid' AND id NOT IN (SELECT order_id FROM payments_payment)",
            [voucher.pk],
        )
        cursor.execute(
            "INSERT INTO payments_providercharge (reference, created_at, sent_at, callbacks, acknowledgements)"
            " SELECT reference, NOW(6), NOW(6), 1, 1 FROM payments_payment"
            " WHERE reference NOT IN (SELECT reference FROM payments_providercharge)"
        )


def add_draws(pool, count: int, prefix: str) -> None:
    """``count`` draws in ``pool``, one in three of no prize, in every status."""
    prize = pool.prizes.all()[0]
    insert_series(
        "lottery_draw",
        count,
        {
            "pool_id": str(pool.pk),
            "user_id": user_of(prefix),
            "prize_id": f"IF(MOD(seq, 3) = 0, NULL, {prize.pk})",
            "stock_id": f"IF(MOD(seq, 3) = 0, NULL, {prize.stock_id})",
            "seq": "1",
            "status": "IF(MOD(seq, 3) = 0, 'confirmed', ELT(MOD(seq, 4) + 1, 'confirmed', 'held', 'claimed', "
            "'forfeited'))",
            "hold_until": "NOW(6) + INTERVAL 1 HOUR",
            "releases": "0",
            "created_at": "NOW(6) - INTERVAL seq SECOND",
        },
    )


def admin_pages(voucher, pool) -> list[str]:
    return [
        "/admin/orders/order/",
        "/admin/orders/order/?status__exact=held",
        f"/admin/orders/order/?voucher__id__exact={voucher.pk}",
        "/admin/orders/order/?q=buyer-1",
        "/admin/lottery/draw/",
        f"/admin/lottery/draw/?pool__id__exact={pool.pk}&status__exact=held",
        "/admin/lottery/draw/?q=buyer-1",
        "/admin/orders/voucher/",
        "/admin/lottery/pool/",
        f"/admin/orders/voucher/{voucher.pk}/change/",
        f"/admin/orders/voucher/{voucher.pk}/payments-audit/",
        f"/admin/lottery/pool/{pool.pk}/change/",
    ]


def queries_of(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(captured)


def test_the_admin_pages_make_as_many_queries_for_1000_records_as_for_10(admin_client_, make_voucher, make_pool):
    voucher, pool = make_voucher(stock=0), make_pool()
    add_users("buyer")
    add_orders(voucher, 10, "buyer")
    add_draws(pool, 10, "buyer")
    pages = admin_pages(voucher, pool)
    for url in pages:  # a first visit reads the content types, which Django keeps
        queries_of(admin_client_, url)
    few = {url: queries_of(admin_client_, url) for url in pages}
    add_orders(voucher, 990, "buyer")
    add_draws(pool, 990, "buyer")
    assert Order.objects.count() == 1000
    assert {url: queries_of(admin_client_, url) for url in pages} == few


def audit_queries() -> int:
    with CaptureQueriesContext(connection) as captured:
        try:
            call_command("audit", stdout=io.StringIO())
        except SystemExit:
            pass  # the seeded stock does not add up: the count is what this measures
    return len(captured)


def test_manage_audit_makes_as_many_queries_for_1000_records_and_three_items_as_for_one(make_voucher, make_pool):
    voucher, pool = make_voucher(stock=0, title="First"), make_pool(name="First")
    add_users("buyer")
    add_orders(voucher, 10, "buyer")
    add_draws(pool, 10, "buyer")
    few = audit_queries()
    add_orders(voucher, 990, "buyer")
    add_draws(pool, 990, "buyer")
    for n in (2, 3):
        add_orders(make_voucher(stock=0, title=f"Voucher {n}"), 100, "buyer")
        add_draws(make_pool(name=f"Pool {n}"), 100, "buyer")
    assert audit_queries() == few


def test_the_record_lists_count_up_to_the_cap_and_say_so(admin_client_, make_voucher, monkeypatch):
    monkeypatch.setattr(CappedPaginator, "cap", 250)
    voucher = make_voucher(stock=0)
    add_users("buyer")
    add_orders(voucher, 300, "buyer")
    page = admin_client_.get("/admin/orders/order/")
    assert page.context["cl"].result_count == 250
    assert isinstance(page.context["cl"].result_count, AtLeast)
    assert "250+ orders" in page.content.decode()
    # The pages stop at the cap: the third holds the 201st to the 250th newest.
    third = admin_client_.get("/admin/orders/order/?p=3")
    newest = list(Order.objects.order_by("-created_at", "-id").values_list("pk", flat=True)[200:250])
    assert [order.pk for order in third.context["cl"].result_list] == newest
    assert admin_client_.get("/admin/orders/order/?p=4").status_code == 302  # past the cap: the list's first page
    filtered = admin_client_.get("/admin/orders/order/?status__exact=held")
    assert filtered.context["cl"].result_count == 60
    assert "60 results" in filtered.content.decode()


def test_the_lists_search_a_username_from_its_start_and_filter_by_item(admin_client_, make_voucher, make_pool):
    voucher, other = make_voucher(stock=0, title="Shown"), make_voucher(stock=0, title="Other")
    add_users("buyer")
    add_orders(voucher, 20, "buyer")
    add_orders(other, 5, "buyer")
    found = admin_client_.get("/admin/orders/order/?q=buyer-7").context["cl"].result_list
    assert {order.user.username for order in found} == {"buyer-7"}
    assert len(found) == 1
    assert not admin_client_.get("/admin/orders/order/?q=uyer-7").context["cl"].result_list
    by_item = admin_client_.get(f"/admin/orders/order/?voucher__id__exact={other.pk}").context["cl"].result_list
    assert [order.voucher.title for order in by_item] == ["Other"] * 5
    pool = make_pool()
    add_draws(pool, 12, "buyer")
    draws = admin_client_.get("/admin/lottery/draw/?q=buyer-3&status__exact=held").context["cl"].result_list
    assert {(draw.user.username, draw.status) for draw in draws} <= {("buyer-3", "held")}


def test_the_item_lists_show_the_held_records_and_the_orders(admin_client_, make_voucher, make_pool):
    voucher, pool = make_voucher(stock=0), make_pool()
    add_users("buyer")
    add_orders(voucher, 20, "buyer")
    # The running totals, as the takes that wrote those orders would have kept them.
    totals_recount(VOUCHER, item_ids=[voucher.pk])
    add_draws(pool, 24, "buyer")
    page = admin_client_.get("/admin/orders/voucher/").content.decode()
    assert '<td class="field-held">4</td>' in page
    # 12 of the 20 orders hold a unit (confirmed, held, paid), of none supplied: an oversell shows.
    assert '<td class="field-sold">12 <strong>oversold 12</strong></td>' in page
    page = admin_client_.get("/admin/lottery/pool/").content.decode()
    assert '<td class="field-held">4</td>' in page


def test_the_record_lists_show_the_shops_records_unless_asked_for_the_labs(admin_client_, make_voucher, make_pool):
    """A lab run's or a load test's thousands of records would bury the shop's: the lists show
    the listed items' by default, and theirs too, or alone, when asked."""
    shop, lab = make_voucher(stock=0, title="Shop"), make_voucher(stock=0, title="Lab", listed=False)
    shop_pool, lab_pool = make_pool(name="Shop pool"), make_pool(name="Lab pool", listed=False)
    add_users("buyer")
    add_orders(shop, 3, "buyer")
    add_orders(lab, 5, "buyer")
    add_draws(shop_pool, 4, "buyer")
    add_draws(lab_pool, 6, "buyer")

    def shown(url: str) -> list[str]:
        page = admin_client_.get(url)
        return sorted({str(getattr(one, "voucher", None) or one.pool) for one in page.context["cl"].result_list})

    orders, draws = "/admin/orders/order/", "/admin/lottery/draw/"
    assert shown(orders) == [str(shop)] and shown(draws) == [str(shop_pool)]
    assert shown(f"{orders}?items=all") == sorted([str(shop), str(lab)])
    assert shown(f"{orders}?items=unlisted") == [str(lab)]
    assert shown(f"{draws}?items=unlisted&status__exact=confirmed") == [str(lab_pool)]
    assert len(admin_client_.get(f"{draws}?items=all").context["cl"].result_list) == 10
    # An item picked in its filter shows its records, listed or not.
    assert shown(f"{orders}?voucher__id__exact={lab.pk}") == [str(lab)]
    assert "The shop&#x27;s (listed)" in admin_client_.get(orders).content.decode()


BIG = 20_000


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "mysql", reason="reads MariaDB's EXPLAIN")
def test_the_order_and_draw_lists_read_their_page_not_every_record(admin_client_, make_voucher, make_pool):
    """On tables of 40,000 records, every query of the lists, filtered, searched and deep
    in their pages, reads no more than the count's cap: the plans a big site gets."""
    vouchers = [make_voucher(stock=0, title=f"Voucher {n}") for n in range(2)]
    pool = make_pool()
    add_users("buyer")
    for voucher in vouchers:
        add_orders(voucher, BIG, "buyer")
    add_draws(pool, 2 * BIG, "buyer")
    # And a lab run's item beside them, which the lists leave out unless asked.
    add_orders(make_voucher(stock=0, title="Lab", listed=False), 500, "buyer")
    add_draws(make_pool(name="Lab", listed=False), 500, "buyer")
    analyze("auth_user", "orders_order", "lottery_draw", "payments_payment")
    lists = {
        "orders_order": [
            "/admin/orders/order/",
            "/admin/orders/order/?items=all&p=30",
            "/admin/orders/order/?status__exact=held",
            f"/admin/orders/order/?voucher__id__exact={vouchers[0].pk}&p=5",
            "/admin/orders/order/?q=buyer-12",
            "/admin/orders/order/?items=unlisted",
        ],
        "lottery_draw": [
            "/admin/lottery/draw/",
            "/admin/lottery/draw/?items=all&p=30",
            f"/admin/lottery/draw/?pool__id__exact={pool.pk}&status__exact=claimed",
            "/admin/lottery/draw/?q=buyer-12",
            "/admin/lottery/draw/?items=unlisted&p=2",
        ],
    }
    for table, urls in lists.items():
        for url in urls:
            with CaptureQueriesContext(connection) as captured:
                assert admin_client_.get(url).status_code == 200
            assert_no_full_scan(captured, tables=[table], max_rows=CappedPaginator.cap + 1)
    # The check refuses the plan a page deep in the list had, every order read and sorted.
    deep = Order.objects.order_by("-created_at", "-id")[9_900:10_000]
    assert full_scans(*deep.query.sql_with_params(), tables=["orders_order"], max_rows=CappedPaginator.cap + 1)
