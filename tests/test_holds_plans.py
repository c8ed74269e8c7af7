"""The expiry of one item's holds reads that item's due holds, however many due holds other
items hold ahead of them: an item whose holds stay due (its Redis out of reach, the sweep
passing over it) costs every other item's expiry task nothing (docs/design.md, "Lifecycle").
On MariaDB, read from the plans of the queries it runs on a table seeded big."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from inventory.holds import holds_expire_due
from lottery.models import Draw, Pool
from lottery.product import POOL
from lottery.selectors import pool_get
from lottery.services import pool_draw
from orders.models import Order, Voucher
from orders.product import VOUCHER
from orders.selectors import voucher_get
from orders.services import order_purchase
from tests.plans import analyze, explain, insert_series
from tests.stock import stock_row

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "mysql", reason="reads MariaDB's EXPLAIN"),
]

# The other item's due holds, every one due before this item's first.
STUCK = 20_000
# This item's records settled long ago (a sale that sold), and its holds due now.
SETTLED = 5_000
DUE = 8
# Due in 2000: before any hold the test makes.
LONG_AGO = "TIMESTAMP '2000-01-01 00:00:00' + INTERVAL seq SECOND"


def _orders(voucher: Voucher, user_id: int, count: int, status: str) -> None:
    insert_series(
        "orders_order",
        count,
        {
            "voucher_id": str(voucher.pk),
            "stock_id": str(stock_row(voucher)),
            "user_id": str(user_id),
            "status": f"'{status}'",
            "hold_until": LONG_AGO,
            "settled_at": "NULL" if status == "held" else LONG_AGO,
            "releases": "0",
            "created_at": LONG_AGO,
        },
    )


def _draws(pool: Pool, user_id: int, count: int, status: str) -> None:
    prize = pool.prizes.all()[0]
    insert_series(
        "lottery_draw",
        count,
        {
            "pool_id": str(pool.pk),
            "user_id": str(user_id),
            "prize_id": str(prize.pk),
            "stock_id": str(prize.stock_id),
            "seq": "seq",
            "status": f"'{status}'",
            "hold_until": LONG_AGO,
            "settled_at": "NULL" if status == "held" else LONG_AGO,
            "releases": "0",
            "created_at": LONG_AGO,
        },
    )


def _voucher_due(make_voucher, make_user):
    """A voucher that sold ``SETTLED`` long ago and holds ``DUE`` due now, and another
    voucher's ``STUCK`` holds due before them."""
    other, voucher = make_voucher(stock=1), make_voucher(stock=DUE)
    Voucher.objects.filter(pk__in=[other.pk, voucher.pk]).update(hold_seconds=60)
    for _ in range(DUE):
        order_purchase(user=make_user(), voucher=voucher_get(voucher_id=voucher.pk))
    Order.objects.filter(voucher=voucher).update(hold_until=timezone.now() - timedelta(minutes=1))
    _orders(other, make_user().pk, STUCK, "held")
    _orders(voucher, make_user().pk, SETTLED, "paid")
    analyze("orders_order")
    return VOUCHER, voucher, "orders_order", "order_item_hold_due"


def _pool_due(make_pool, make_user):
    """A pool of ``SETTLED`` prizes claimed long ago and ``DUE`` held due now, and another
    pool's ``STUCK`` holds due before them."""
    other = make_pool(prizes=(("Gold", 1),), draws_per_user=STUCK)
    pool = make_pool(prizes=(("Gold", DUE),), draws_per_user=SETTLED)
    Pool.objects.filter(pk__in=[other.pk, pool.pk]).update(hold_seconds=60)
    for _ in range(DUE):
        pool_draw(user=make_user(), pool=pool_get(pool_id=pool.pk))
    Draw.objects.filter(pool=pool).update(hold_until=timezone.now() - timedelta(minutes=1))
    _draws(pool_get(pool_id=other.pk), make_user().pk, STUCK, "held")
    _draws(pool_get(pool_id=pool.pk), make_user().pk, SETTLED, "claimed")
    analyze("lottery_draw")
    return POOL, pool, "lottery_draw", "draw_item_hold_due"


@pytest.fixture(params=["voucher", "pool"])
def due(request, make_voucher, make_pool, make_user):
    """(product, item, table, index): an item with ``DUE`` holds due behind ``STUCK`` of
    another item's, the statistics fresh."""
    if request.param == "voucher":
        return _voucher_due(make_voucher, make_user)
    return _pool_due(make_pool, make_user)


def test_an_items_expiry_reads_its_own_due_holds_not_the_other_items_due_before_them(due):
    product, item, table, index = due
    with CaptureQueriesContext(connection) as captured:
        assert holds_expire_due(product, item_id=item.pk) == DUE
    reads = [
        query["sql"]
        for query in captured.captured_queries
        if query["sql"].startswith("SELECT") and f"FROM `{table}`" in query["sql"] and "`hold_until` <=" in query["sql"]
    ]
    assert reads, captured.captured_queries
    for sql in reads:
        (row,) = [row for row in explain(sql) if row["table"] == table]
        # A range of (item, status, deadline) in the index's order: this item's rows, no
        # other item's, and no sort of them.
        assert row["key"] == index, (row, sql)
        assert int(str(row["rows"]).split()[0]) <= 10 * DUE, (row, sql)
        assert "filesort" not in (row["Extra"] or ""), (row, sql)
