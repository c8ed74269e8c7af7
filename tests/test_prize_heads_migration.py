"""The migrations that let a prize's units be spread over rows (``inventory.0008``: ``Stock.head``;
``lottery.0011``: every prize's row its own head), run on a database seeded as it stood before
them: each prize keeps its row, its stock and its draws, reads the same through the one
selector of a prize's stock, and the audit passes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from inventory.models import Stock
from lottery.models import Draw, Prize
from lottery.selectors import pool_audit, pool_get

from .test_record_stock_migration import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("inventory", "0007_stock_bucket"), ("lottery", "0010_pool_buckets"), ("orders", "0012_voucher_buckets")]


def seed(apps) -> dict:
    """A pool as it stood before: two prizes of one row each, draws that won, lost, or gave
    a prize back, each row's running total as the takes kept it; and a voucher's row."""
    User = apps.get_model("auth", "User")
    StockGroup, Stock = apps.get_model("inventory", "StockGroup"), apps.get_model("inventory", "Stock")
    Pool, Prize, Draw = (apps.get_model("lottery", name) for name in ("Pool", "Prize", "Draw"))
    ann, bob = (User.objects.create(username=f"before-{name}") for name in ("ann", "bob"))
    now = timezone.now()
    group = StockGroup.objects.create()
    pool = Pool.objects.create(
        name="Pool",
        draws_per_user=2,
        no_prize_weight=3,
        group=group,
        begin_at=now - timedelta(hours=1),
        end_at=now + timedelta(hours=1),
        strategy="db_atomic",
    )

    def row(supplied: int, taken: int):
        return Stock.objects.create(group=group, quantity=supplied - taken, initial_quantity=supplied, taken=taken)

    gold = Prize.objects.create(pool=pool, name="Gold", stock=row(2, 1))
    silver = Prize.objects.create(pool=pool, name="Silver", stock=row(3, 1))
    Draw.objects.create(user=ann, pool=pool, prize=gold, stock_id=gold.stock_id, seq=1, user_guard=ann.pk)
    Draw.objects.create(user=ann, pool=pool, prize=None, seq=2, user_guard=ann.pk)
    Draw.objects.create(user=bob, pool=pool, prize=silver, stock_id=silver.stock_id, seq=1, user_guard=bob.pk)
    Draw.objects.create(user=bob, pool=pool, prize=gold, stock_id=gold.stock_id, seq=2, status="forfeited", releases=1)
    voucher_row = Stock.objects.create(group=StockGroup.objects.create(), quantity=4, initial_quantity=4)
    return {"pool": pool.pk, "prizes": {gold.pk: gold.stock_id, silver.pk: silver.stock_id}, "other": voucher_row.pk}


def test_each_prize_becomes_the_head_of_its_one_row_and_reads_and_audits_as_before(capsys):
    seeded = seed(migrate(BEFORE))
    migrate()

    assert dict(Prize.objects.values_list("pk", "stock_id")) == seeded["prizes"]
    heads = dict(Stock.objects.filter(pk__in=seeded["prizes"].values()).values_list("pk", "head_id"))
    assert heads == {row: row for row in seeded["prizes"].values()}
    assert Stock.objects.get(pk=seeded["other"]).head_id is None  # a row of no prize is no share
    shown = {
        prize.name: (prize.stock_left, prize.stock_supplied) for prize in pool_get(pool_id=seeded["pool"]).prizes.all()
    }
    assert shown == {"Gold": (1, 2), "Silver": (2, 3)}
    assert Draw.objects.count() == 4
    audit = pool_audit(pool_id=seeded["pool"])
    assert audit.ok and (audit.supplied, audit.stock, audit.awarded) == (5, 3, 2), audit
    call_command("audit")
    assert "0 broken." in capsys.readouterr().out

    migrate(BEFORE)  # and back, with nothing to undo but the column
    migrate()
