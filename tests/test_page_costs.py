"""What the shop's public pages, the fragments they poll and the API's calls cost does not
grow with the records a site has written (docs/design.md, "Running totals"): the same
queries for an item with ten records as for one with a thousand, none of them over the
records for a visitor, and on MariaDB no plan that scans the records table for a signed-in
user's own state."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from inventory.models import Stock
from inventory.totals import totals_recount
from lottery.models import Draw
from lottery.product import POOL
from lottery.selectors import pool_audit
from lottery.services import pool_draw, pool_update
from orders.models import Order
from orders.product import VOUCHER
from orders.selectors import voucher_audit
from orders.services import order_purchase, voucher_update
from tests.stock import stock_row

pytestmark = pytest.mark.django_db

RECORD_TABLES = (Order._meta.db_table, Draw._meta.db_table)


def voucher_pages(voucher) -> list[str]:
    return [
        reverse("pages:voucher_list"),
        reverse("pages:voucher_stock"),
        reverse("pages:voucher_detail", args=[voucher.pk]),
        reverse("pages:voucher_live", args=[voucher.pk]),
    ]


def pool_pages(pool) -> list[str]:
    return [
        reverse("lottery:pool_list"),
        reverse("lottery:pool_rows"),
        reverse("lottery:pool_detail", args=[pool.pk]),
        reverse("lottery:pool_odds", args=[pool.pk]),
        reverse("lottery:pool_standing", args=[pool.pk]),
    ]


def queries_of(client: Client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200, url
    return [query["sql"] for query in captured.captured_queries]


def users_bulk(django_user_model, count: int, prefix: str) -> list[int]:
    django_user_model.objects.bulk_create(django_user_model(username=f"{prefix}-{n}") for n in range(count))
    return list(django_user_model.objects.filter(username__startswith=f"{prefix}-").values_list("pk", flat=True))


def orders_bulk(voucher, user_ids: list[int]) -> None:
    """Orders in every status, as years of sales leave them, with the running totals the
    takes would have kept."""
    statuses = [Order.Status.CONFIRMED, Order.Status.PAID, Order.Status.CANCELLED, Order.Status.EXPIRED]
    row = stock_row(voucher)
    Order.objects.bulk_create(
        Order(user_id=user_id, voucher=voucher, stock_id=row, status=statuses[n % len(statuses)], buyer_guard=None)
        for n, user_id in enumerate(user_ids)
    )
    totals_recount(VOUCHER, item_ids=[voucher.pk])


def draws_bulk(pool, user_ids: list[int]) -> None:
    prize = pool.prizes.first()
    Draw.objects.bulk_create(
        Draw(
            user_id=user_id,
            pool=pool,
            prize=prize if n % 3 == 0 else None,
            stock_id=prize.stock_id if n % 3 == 0 else None,
            seq=1,
            user_guard=user_id,
        )
        for n, user_id in enumerate(user_ids)
    )
    totals_recount(POOL, item_ids=[pool.pk])


@pytest.mark.parametrize("signed_in", [False, True], ids=["visitor", "buyer"])
def test_the_voucher_pages_cost_the_same_with_ten_orders_as_with_a_thousand(
    signed_in, client, make_user, make_voucher, django_user_model
):
    few, many = make_voucher(stock=10_000, strategy="none"), make_voucher(stock=10_000, strategy="none")
    orders_bulk(few, users_bulk(django_user_model, 10, "few"))
    orders_bulk(many, users_bulk(django_user_model, 1_000, "many"))
    if signed_in:
        client.force_login(make_user())
    for few_url, many_url in zip(voucher_pages(few), voucher_pages(many), strict=True):
        assert len(queries_of(client, few_url)) == len(queries_of(client, many_url)), many_url
        if not signed_in:
            assert not [sql for sql in queries_of(client, many_url) if Order._meta.db_table in sql], many_url


@pytest.mark.parametrize("signed_in", [False, True], ids=["visitor", "buyer"])
def test_the_pool_pages_cost_the_same_with_ten_draws_as_with_a_thousand(
    signed_in, client, make_user, make_pool, django_user_model
):
    few = make_pool(prizes=(("Gold", 5_000),), draws_per_user=3)
    many = make_pool(prizes=(("Gold", 5_000),), draws_per_user=3)
    draws_bulk(few, users_bulk(django_user_model, 10, "few"))
    draws_bulk(many, users_bulk(django_user_model, 1_000, "many"))
    if signed_in:
        client.force_login(make_user())
    for few_url, many_url in zip(pool_pages(few), pool_pages(many), strict=True):
        assert len(queries_of(client, few_url)) == len(queries_of(client, many_url)), many_url
        if not signed_in:
            assert not [sql for sql in queries_of(client, many_url) if Draw._meta.db_table in sql], many_url


# ANALYZE TABLE commits: the test's rows are flushed after it, not rolled back.
@pytest.mark.django_db(transaction=True)
def test_a_buyers_own_state_is_read_through_an_index(client, make_user, make_voucher, make_pool, django_user_model):
    """MariaDB's plan for each query of a signed-in buyer's pages that reads the records:
    never a scan of the whole table, whatever it holds."""
    if connection.vendor != "mysql":
        pytest.fail("the plans are MariaDB's: run this file on MariaDB")
    voucher, pool = make_voucher(stock=100_000), make_pool(prizes=(("Gold", 100_000),))
    user_ids = users_bulk(django_user_model, 3_000, "crowd")
    orders_bulk(voucher, user_ids)
    draws_bulk(pool, user_ids)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE TABLE {Order._meta.db_table}, {Draw._meta.db_table}")
        cursor.fetchall()
    client.force_login(make_user())
    for url in voucher_pages(voucher) + pool_pages(pool):
        for sql in queries_of(client, url):
            if not any(table in sql for table in RECORD_TABLES):
                continue
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN {sql}")
                columns = [column[0] for column in cursor.description]
                plan = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
            scans = [row for row in plan if row["table"] in RECORD_TABLES and row["type"] == "ALL"]
            assert not scans, (url, sql, plan)


def test_a_new_draw_limit_recounts_the_users_over_it(make_user, make_pool):
    pool = make_pool(prizes=(("Gold", 10),), draws_per_user=3, strategy="none")
    ann, bob = make_user(), make_user()
    for user, draws in ((ann, 3), (bob, 2)):
        for _ in range(draws):
            pool_draw(user=user, pool=pool)
    assert (pool_audit(pool_id=pool.pk).users_over_limit, pool_audit(pool_id=pool.pk).totals_agree) == (0, True)
    pool_update(pool=pool, draws_per_user=1)
    audit = pool_audit(pool_id=pool.pk)
    assert (audit.users_over_limit, audit.draws_over_limit) == (2, 3)
    assert audit.totals_agree, audit
    pool.group.refresh_from_db()
    assert (pool.group.over_takers, pool.group.over_takes) == (2, 3)


def test_the_migration_counts_the_totals_of_the_records_already_written(
    transactional_db, make_user, make_voucher, make_pool
):
    """A site upgraded with records in place gets the totals its records say."""
    voucher = make_voucher(stock=5, strategy="none")
    ann, bob = make_user(), make_user()
    statuses = (Order.Status.CONFIRMED, Order.Status.PAID, Order.Status.CANCELLED)
    Order.objects.bulk_create(Order(user=ann, voucher=voucher, status=status) for status in statuses)
    pool = make_pool(prizes=(("Gold", 5),), draws_per_user=1, strategy="none")
    gold = pool.prizes.get()
    Draw.objects.bulk_create(Draw(user=bob, pool=pool, prize=gold, seq=n) for n in (1, 2))
    executor = MigrationExecutor(connection)
    executor.migrate([("inventory", "0005_voucher_moved_to_orders")])
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    voucher_totals, pool_totals = voucher_audit(voucher_id=voucher.pk), pool_audit(pool_id=pool.pk)
    assert voucher_totals.totals_agree and pool_totals.totals_agree
    stock = Stock.objects.select_related("group").get(pk=stock_row(voucher))
    assert (stock.taken, stock.group.over_takes, stock.group.over_takers) == (2, 1, 1)
    gold_stock = Stock.objects.select_related("group").get(pk=gold.stock_id)
    assert (gold_stock.taken, gold_stock.group.over_takes, gold_stock.group.over_takers) == (2, 1, 1)


# --- the API --------------------------------------------------------------------------------------


def api_queries(client: Client, method: str, url: str) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as captured:
        status = getattr(client, method)(url, content_type="application/json").status_code
    return status, len(captured.captured_queries)


@pytest.fixture
def sites(make_voucher, make_pool, django_user_model):
    """Two of each item, with a payment or claim window, one with 10 records and one with
    1,000 of other users'."""
    made = {}
    for name, count in (("few", 10), ("many", 1_000)):
        voucher = make_voucher(stock=10_000, strategy="db_atomic", title=name)
        voucher_update(voucher=voucher, hold_seconds=600)
        pool = make_pool(prizes=(("Gold", 10_000),), draws_per_user=3, name=name)
        pool_update(pool=pool, hold_seconds=600)
        user_ids = users_bulk(django_user_model, count, name)
        orders_bulk(voucher, user_ids)
        draws_bulk(pool, user_ids)
        made[name] = (voucher, pool)
    return made


def test_every_api_call_costs_the_same_with_ten_records_as_with_a_thousand(
    sites, api_client, settings, payment_provider
):
    # The token check reads the revocations once a second in whichever call comes then: once an
    # hour here, read by the first call, so that each call counts its own queries only.
    settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS = 3600
    counted = {}
    for name, (voucher, pool) in sites.items():
        buyer = api_client()
        buyer.get("/api/orders")
        calls = [
            ("get", "/api/vouchers"),
            ("get", f"/api/vouchers/{voucher.pk}"),
            ("get", "/api/pools"),
            ("get", f"/api/pools/{pool.pk}"),
            ("post", f"/api/vouchers/{voucher.pk}/purchase"),
            ("post", f"/api/pools/{pool.pk}/draw"),
        ]
        answers = [api_queries(buyer, method, url) for method, url in calls]
        order = Order.objects.get(voucher=voucher, user=buyer.user)
        draw = Draw.objects.get(pool=pool, user=buyer.user)
        answers.append(api_queries(buyer, "post", f"/api/orders/{order.public_id}/pay"))
        answers.append(api_queries(buyer, "get", f"/api/orders/{order.public_id}"))
        second = api_client()
        second.get("/api/orders")
        api_queries(second, "post", f"/api/vouchers/{voucher.pk}/purchase")
        answers.append(
            api_queries(
                second, "post", f"/api/orders/{Order.objects.get(voucher=voucher, user=second.user).public_id}/cancel"
            )
        )
        if draw.prize_id is not None:
            answers.append(api_queries(buyer, "post", f"/api/draws/{draw.public_id}/claim"))
        counted[name] = answers
    statuses = [status for status, _ in counted["many"]]
    assert all(status in (200, 201) for status in statuses), statuses
    assert [queries for _, queries in counted["few"]] == [queries for _, queries in counted["many"]]


def test_a_rendered_row_is_kept_only_while_what_it_shows_stays(client, make_user, make_voucher, make_pool):
    """The lists' rows are rendered once per process for what they show (the "fragments"
    cache): a sale, a draw, a strategy switch show at the next poll."""
    voucher = make_voucher(stock=3)
    pool = make_pool(prizes=(("Gold", 2),), draws_per_user=3)

    def cell(url: str, testid: str) -> str:
        return re.search(rf'data-testid="{testid}">(.*?)</td>', client.get(url).content.decode(), re.S).group(1)

    assert cell(reverse("pages:voucher_stock"), f"stock-{voucher.pk}") == "3 / 3"
    order_purchase(user=make_user(), voucher=voucher)
    assert cell(reverse("pages:voucher_stock"), f"stock-{voucher.pk}") == "2 / 3"
    voucher_update(voucher=voucher, strategy="redis_lock")
    assert "redis_lock" in client.get(reverse("pages:voucher_stock")).content.decode()
    assert cell(reverse("lottery:pool_rows"), f"pool-left-{pool.pk}") == "2 of 2"
    pool_draw(user=make_user(), pool=pool)
    assert cell(reverse("lottery:pool_rows"), f"pool-left-{pool.pk}") == "1 of 2"
