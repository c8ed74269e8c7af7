"""The migrations that give a voucher its stock group and every order and draw the stock row
it took (``orders.0011``, ``lottery.0009``), run on a database seeded as it stood before
them: the records keep their data and carry the right row, and the audit passes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from lottery.models import Draw
from orders.models import Order, Voucher
from orders.selectors import voucher_get

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("inventory", "0006_running_totals"),
    ("orders", "0010_order_voucher_user_status"),
    ("lottery", "0008_draw_created_index"),
]


def migrate(targets=None):
    """Migrate to ``targets`` (every app's latest by default); the models as they stood there."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def seed(apps) -> dict:
    """A site as it stood before: a voucher with orders in every status, one without any,
    and a pool whose draws won a prize, won none, or gave one back; every stock row's
    running total as the takes kept it. The ids of what the records must carry."""
    User = apps.get_model("auth", "User")
    StockGroup, Stock = apps.get_model("inventory", "StockGroup"), apps.get_model("inventory", "Stock")
    Voucher, Order = apps.get_model("orders", "Voucher"), apps.get_model("orders", "Order")
    Pool, Prize, Draw = (apps.get_model("lottery", name) for name in ("Pool", "Prize", "Draw"))
    ann, bob, cem, dee = (User.objects.create(username=f"before-{name}") for name in ("ann", "bob", "cem", "dee"))
    now = timezone.now()
    window = {"begin_at": now - timedelta(hours=1), "end_at": now + timedelta(hours=1), "strategy": "db_atomic"}

    def row(supplied: int, taken: int, group=None):
        group = group or StockGroup.objects.create()
        return Stock.objects.create(group=group, quantity=supplied - taken, initial_quantity=supplied, taken=taken)

    sold_row, unsold_row = row(5, 3), row(4, 0)
    sold = Voucher.objects.create(title="Sold", stock=sold_row, hold_seconds=600, **window)
    unsold = Voucher.objects.create(title="Unsold", stock=unsold_row, **window)
    later = now + timedelta(minutes=10)
    orders = [
        Order.objects.create(user=ann, voucher=sold, status="confirmed", buyer_guard=ann.pk),
        Order.objects.create(
            user=bob, voucher=sold, status="paid", hold_until=later, settled_at=now, buyer_guard=bob.pk
        ),
        Order.objects.create(user=cem, voucher=sold, status="held", hold_until=later, buyer_guard=cem.pk),
        Order.objects.create(user=dee, voucher=sold, status="cancelled", hold_until=later, released_at=now, releases=1),
    ]
    group = StockGroup.objects.create()
    pool = Pool.objects.create(
        name="Pool", draws_per_user=2, no_prize_weight=3, group=group, hold_seconds=600, **window
    )
    gold = Prize.objects.create(pool=pool, name="Gold", stock=row(2, 1, group))
    silver = Prize.objects.create(pool=pool, name="Silver", stock=row(3, 1, group))
    draws = {
        Draw.objects.create(user=ann, pool=pool, prize=gold, seq=1, user_guard=ann.pk, status="claimed").pk: gold,
        Draw.objects.create(user=ann, pool=pool, prize=None, seq=2, user_guard=ann.pk).pk: None,
        Draw.objects.create(user=bob, pool=pool, prize=silver, seq=1, user_guard=bob.pk, status="held").pk: silver,
        Draw.objects.create(
            user=cem, pool=pool, prize=gold, seq=1, user_guard=cem.pk, status="forfeited", releases=1
        ).pk: gold,
    }
    return {
        "groups": {sold.pk: sold_row.group_id, unsold.pk: unsold_row.group_id},
        "rows": {sold.pk: sold_row.pk, unsold.pk: unsold_row.pk},
        "orders": {order.pk: sold_row.pk for order in orders},
        "draws": {pk: None if prize is None else prize.stock_id for pk, prize in draws.items()},
    }


def test_a_database_seeded_before_keeps_its_records_each_with_its_stock_row_and_passes_its_audit(capsys):
    seeded = seed(migrate(BEFORE))
    migrate()

    assert dict(Voucher.objects.values_list("pk", "group_id")) == seeded["groups"]
    assert dict(Order.objects.values_list("pk", "stock_id")) == seeded["orders"]
    assert dict(Draw.objects.values_list("pk", "stock_id")) == seeded["draws"]
    assert sorted(Order.objects.values_list("status", flat=True)) == ["cancelled", "confirmed", "held", "paid"]
    sold, unsold = (voucher_get(voucher_id=pk) for pk in seeded["groups"])
    assert (sold.stock_left, sold.stock_supplied, sold.stock_taken) == (2, 5, 3)
    assert (unsold.stock_left, unsold.stock_supplied, unsold.stock_taken) == (4, 4, 0)
    call_command("audit")  # exits 1 when an invariant breaks, the running totals' agreement among them
    assert "2 vouchers, 1 pools, 0 broken." in capsys.readouterr().out

    # And back: each voucher gets its row again, the first of its group.
    back = migrate(BEFORE)
    assert dict(back.get_model("orders", "Voucher").objects.values_list("pk", "stock_id")) == seeded["rows"]
    migrate()
