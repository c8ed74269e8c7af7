"""A user's own lists (``GET /api/orders``, ``GET /api/draws``, the pages ``/orders/`` and
``/draws/``) come a page at a time, newest first, by a cursor (``inventory.paging``): each page
costs the same queries whatever the user's history, the pages together hold every record
once and in order also while new ones are made, and a page parameter out of its form is
refused in words (422 in the API, 400 on the pages), never a server error."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from inventory.paging import PAGE_SIZE, Cursor
from lottery.models import Draw
from orders.models import Order
from orders.services import voucher_update
from payments.models import Payment
from tests.stock import stock_row

from .http import assert_error

pytestmark = pytest.mark.django_db

LISTS = ("/api/orders", "/api/draws", "/orders/", "/draws/")
# One state per record in turn, so that every state, and a payment of each kind, is on every page.
ORDER_STATES = ("confirmed", "held", "paid", "cancelled", "expired", "held")
DRAW_STATES = ("confirmed", "held", "claimed", "forfeited")


@pytest.fixture
def items(make_voucher, make_pool):
    """A voucher with a payment window and a pool with a claim window, for many records of one user."""
    voucher = make_voucher(stock=10_000)
    voucher_update(voucher=voucher, hold_seconds=600)
    pool = make_pool(prizes=(("Gold", 10_000),), draws_per_user=10_000)
    return voucher, pool


def records_made(user, count: int, items) -> None:
    """``count`` orders and ``count`` draws of ``user`` in every state, in bulk: the released
    orders with a refunded payment and some held ones with a payment on its way. Three
    records share each second of ``created_at``, so that their ids order them."""
    voucher, pool = items
    prize = pool.prizes.get()
    now = timezone.now()
    later, before = now + timedelta(minutes=10), now - timedelta(minutes=10)
    # No one-per-user backstop (buyer_guard, user_guard NULL), as the naive strategies write.
    row = stock_row(voucher)
    orders = Order.objects.bulk_create(
        Order(
            user=user,
            voucher=voucher,
            stock_id=row,
            status=ORDER_STATES[n % len(ORDER_STATES)],
            hold_until=None if n % len(ORDER_STATES) == 0 else (later if ORDER_STATES[n % 6] == "held" else before),
        )
        for n in range(count)
    )
    Payment.objects.bulk_create(
        [
            Payment(
                order=order,
                reference=f"p-{order.public_id}",
                status="refunded",
                refunded_at=now,
                refund_reason="expired",
            )
            for order in orders
            if order.status in ("cancelled", "expired")
        ]
        + [
            Payment(order=order, reference=f"p-{order.public_id}", open_guard=order.pk)
            for n, order in enumerate(orders)
            if order.status == "held" and n % 4 == 1
        ]
    )
    Draw.objects.bulk_create(
        Draw(
            user=user,
            pool=pool,
            seq=n + 1,
            prize=prize if n % 2 else None,
            stock_id=prize.stock_id if n % 2 else None,
            status=DRAW_STATES[n % len(DRAW_STATES)] if n % 2 else "confirmed",
            hold_until=later if n % 2 and DRAW_STATES[n % len(DRAW_STATES)] == "held" else None,
        )
        for n in range(count)
    )
    for model in (Order, Draw):
        ids = list(model.objects.filter(user=user).order_by("pk").values_list("pk", flat=True))
        for n, pk in enumerate(ids):
            model.objects.filter(pk=pk).update(created_at=now - timedelta(seconds=(len(ids) - n) // 3))


def newest_first(model, user) -> list:
    return list(model.objects.filter(user=user).order_by("-created_at", "-id"))


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def shown(response) -> list[int]:
    """The records' ids an answer shows: the API's body, or the page's list."""
    if response["Content-Type"].startswith("application/json"):
        return [one.get("id", one.get("draw_id")) for one in response.json()]
    return [int(n) for n in re.findall(r'data-testid="(?:order|draw)-(\d+)"', response.content.decode())]


def next_of(response) -> str | None:
    """The URL of the next page: the API's Link header, or the page's Older link."""
    if response["Content-Type"].startswith("application/json"):
        link = response.get("Link")
        return None if link is None else re.fullmatch(r'<http://testserver([^>]*)>; rel="next"', link)[1]
    older = re.search(r'<a href="([^"]*)" rel="next"', response.content.decode())
    return None if older is None else older[1].replace("&amp;", "&")


def queries(client: Client, path: str) -> tuple[int, list[int], str | None]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, response.content
    return len(captured), shown(response), next_of(response)


def test_each_list_makes_the_same_queries_for_10_records_as_for_1000(make_user, items):
    few, many = make_user(), make_user()
    records_made(few, 10, items)
    records_made(many, 1000, items)
    for path in LISTS:
        for client in (logged_in(few), logged_in(many)):
            client.get(path)  # what a first request reads once per process
        count_few, shown_few, next_few = queries(logged_in(few), path)
        count_many, shown_many, next_many = queries(logged_in(many), path)
        assert (len(shown_few), next_few) == (10, None), path
        assert len(shown_many) == PAGE_SIZE and next_many is not None, path
        assert count_many == count_few, path
        # A page further on, and the last, cost the same again.
        model = Order if "orders" in path else Draw
        records = newest_first(model, many)
        count_deep, shown_deep, next_deep = queries(logged_in(many), f"{path}?cursor={Cursor.of(records[499])}")
        assert shown_deep == [record.public_id for record in records[500 : 500 + PAGE_SIZE]] and next_deep, path
        assert count_deep == count_few, path
        count_last, shown_last, next_last = queries(logged_in(many), f"{path}?cursor={Cursor.of(records[-20])}")
        assert shown_last == [record.public_id for record in records[-19:]] and next_last is None, path
        assert count_last == count_few, path


def test_a_page_of_orders_shows_each_order_s_own_refund_and_payment_as_a_single_read_does(make_user, items):
    user = make_user()
    records_made(user, 30, items)
    client = logged_in(user)
    listed = client.get("/api/orders?limit=30").json()
    assert {one["status"] for one in listed} == set(ORDER_STATES)
    assert sum(one["refund"] is not None for one in listed) == 10
    assert listed == [client.get(f"/api/orders/{one['id']}").json() for one in listed]
    page = client.get("/orders/").content.decode()
    assert page.count('data-outcome="refunded"') == 10
    paying = Payment.objects.filter(order__user=user, open_guard__isnull=False).count()
    assert paying and page.count('data-outcome="payment_pending"') == paying


def page_through(client: Client, path: str, between=lambda: None) -> list[int]:
    """Every record's id, following the pages from ``path`` to the last; ``between`` is called
    after each page."""
    seen = []
    while path is not None:
        response = client.get(path)
        assert response.status_code == 200, response.content
        seen += shown(response)
        path = next_of(response)
        between()
    return seen


@pytest.mark.parametrize("path", LISTS)
def test_the_pages_hold_every_record_once_newest_first_while_new_ones_are_made(path, make_user, items):
    user = make_user()
    api = path.startswith("/api/")
    # Some pages either way: five records a page through the API, the pages' own size on the pages.
    records_made(user, 23 if api else 2 * PAGE_SIZE + 3, items)
    model = Order if "orders" in path else Draw
    before = [record.public_id for record in newest_first(model, user)]
    made = []

    def another_one():
        # Made while the client pages: newer than every page it has, so on none of the rest.
        made.append(model.objects.create(**_like(newest_first(model, user)[-1])).public_id)

    size = 5 if api else PAGE_SIZE
    first = f"{path}?limit={size}" if api else path
    seen = page_through(logged_in(user), first, another_one)
    assert seen == before
    assert len(made) == len(before) // size + 1
    assert made and shown(logged_in(user).get(first))[: len(made)] == made[::-1][:size]


def _like(record) -> dict:
    fields = {"user_id": record.user_id, "status": "confirmed"}
    if isinstance(record, Order):
        return {**fields, "voucher_id": record.voucher_id}
    return {**fields, "pool_id": record.pool_id, "seq": Draw.objects.count() + 1}


def test_the_pages_show_links_to_older_records_and_back_to_the_newest(make_user, items):
    user = make_user()
    records_made(user, PAGE_SIZE + 7, items)
    client = logged_in(user)
    first = client.get("/orders/").content.decode()
    assert len(shown_html(first)) == PAGE_SIZE
    assert 'aria-label="Pages of my orders"' in first and "Newest orders" not in first
    assert re.search(r'<a href="/orders/\?cursor=[0-9.]+" rel="next" data-testid="older-page">Older orders</a>', first)
    older = client.get(next_of(client.get("/orders/"))).content.decode()
    assert len(shown_html(older)) == 7 and 'rel="next"' not in older
    assert '<a href="/orders/" data-testid="newest-page">Newest orders</a>' in older
    past_the_oldest = f"/orders/?cursor={Cursor.of(newest_first(Order, user)[-1])}"
    assert "No older orders." in client.get(past_the_oldest).content.decode()
    few = make_user()
    records_made(few, 3, items)
    assert 'data-testid="pager"' not in logged_in(few).get("/draws/").content.decode()


def shown_html(page: str) -> list[str]:
    return re.findall(r'data-testid="(?:order|draw)-\d+"', page)


@pytest.mark.parametrize("path", ("/api/orders", "/api/draws"))
@pytest.mark.parametrize(
    "query, name",
    [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("limit=", "limit"),
        ("cursor=", "cursor"),
        ("cursor=yesterday", "cursor"),
        ("cursor=1.2.3", "cursor"),
        ("cursor=-1.5", "cursor"),
        ("cursor=12345678901234567.1", "cursor"),
        ("cursor=1.12345678901234567890", "cursor"),
    ],
)
def test_a_page_parameter_out_of_its_form_is_refused_422_naming_it(path, query, name, make_user):
    response = logged_in(make_user()).get(f"{path}?{query}")
    assert_error(response, 422, "invalid")
    assert response.json()["message"].startswith(f"Invalid input: {name}: ")


@pytest.mark.parametrize("path", ("/orders/", "/draws/"))
@pytest.mark.parametrize("cursor", ["", "yesterday", "1.2.3", "%00"])
def test_a_page_link_out_of_its_form_is_answered_400_with_a_way_back(path, cursor, make_user):
    response = logged_in(make_user()).get(f"{path}?cursor={cursor}")
    assert response.status_code == 400
    page = response.content.decode()
    assert "This link to a page of your" in page and f'<a href="{path}">See your newest' in page


@pytest.mark.parametrize("path", LISTS)
def test_any_cursor_of_the_form_is_taken(path, make_user, items):
    user = make_user()
    records_made(user, 3, items)
    client = logged_in(user)
    assert len(shown(client.get(f"{path}?cursor=9999999999999999.9999999999999999999"))) == 3
    assert shown(client.get(f"{path}?cursor=0.0")) == []


@pytest.mark.django_db(transaction=True)  # ANALYZE TABLE commits: the flush after the test undoes it
def test_a_page_reads_only_its_rows_along_the_user_s_index(make_user, items):
    """The page's rows come from the index on (user, created_at, id) in its order, not from a
    join that starts at the items and sorts every record of the user."""
    user = make_user()
    records_made(user, 1000, items)
    client = logged_in(user)
    for path, table, index in (
        ("/api/orders", "orders_order", "order_user_created"),
        ("/api/draws", "lottery_draw", "draw_user_created"),
    ):
        cursor = Cursor.of(newest_first(Order if "orders" in path else Draw, user)[300])
        with CaptureQueriesContext(connection) as captured:
            client.get(f"{path}?limit=10&cursor={cursor}")
        (page,) = [q["sql"] for q in captured if f"FROM `{table}`" in q["sql"] and "ORDER BY" in q["sql"]]
        with connection.cursor() as db:
            # Statistics as they are, not as InnoDB's background sampling last left them after
            # the bulk insert: the plan then depends on the data alone.
            db.execute(f"ANALYZE TABLE `{table}`")
            db.fetchall()
            db.execute(f"EXPLAIN {page}")
            columns = [column[0] for column in db.description]
            plan = [dict(zip(columns, row, strict=True)) for row in db.fetchall()]
        assert [(row["table"], row["key"]) for row in plan] == [(table, index)], plan
        assert "filesort" not in (plan[0]["Extra"] or ""), plan


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reservations_redis")
def test_under_redis_lua_the_records_still_in_redis_take_their_place_in_the_pages(make_user, make_voucher):
    """Pending orders (reserved, not written) and a failed one (undone) are read from Redis and
    paged with the rows, each once, newest first."""
    from inventory.redis_lua.client import reservations_client
    from inventory.redis_lua.drain import persist_all
    from inventory.redis_lua.item_states import item_reservations_persist
    from orders.product import VOUCHER

    user = make_user()
    client = logged_in(user)
    written = make_voucher(stock=10, title="written")
    Order.objects.bulk_create(Order(user=user, voucher=written, stock_id=stock_row(written)) for _ in range(3))
    reserving = [make_voucher(stock=5, strategy="redis_lua", title=f"reserved {n}") for n in range(4)]
    assert [client.post(f"/vouchers/{voucher.pk}/buy").status_code for voucher in reserving] == [200] * 4
    # The first one's row is refused by the database (an order of the user came meanwhile): failed.
    Order.objects.create(user=user, voucher=reserving[0], stock_id=stock_row(reserving[0]), buyer_guard=user.pk)
    persist_all(
        lambda batch: item_reservations_persist(
            VOUCHER,
            item_id=reserving[0].pk,
            group_id=reserving[0].group_id,
            reservations=reservations_client(),
            consumer="test",
            batch=batch,
        )
    )
    everything = client.get("/api/orders").json()
    assert sorted(one["status"] for one in everything) == ["confirmed"] * 4 + ["failed"] + ["pending"] * 3
    moments = [datetime.fromisoformat(one["created_at"]) for one in everything]
    assert moments == sorted(moments, reverse=True)
    for size in (1, 2, 3):
        assert page_through(client, f"/api/orders?limit={size}") == [one["id"] for one in everything]
    assert page_through(client, "/orders/") == [one["id"] for one in everything]
