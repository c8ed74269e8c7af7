"""What the beat's periodic tasks cost on a database with many records: each run's time and
queries, with nothing to do and with work to do.

    .venv/bin/python -m benchmarks.periodic [--records 200000] [--charges 100000] [--runs 5]

The database (``DATABASE_URL``, by default ``bench_periodic``) gets, once per size and kept
for the next run: a ``redis_lua`` voucher with ``--records`` orders in every status (by as
many buyers) and a ``redis_lua`` pool with ``--records`` draws (two per player), each with
its Redis state loaded from them; and ``--charges`` provider charges whose callback nobody
acknowledged beside as many acknowledged. Everything is written by INSERT ... SELECT from
MariaDB's ``seq_1_to_N`` tables, so that 200,000 records take seconds.

Each task then runs ``--runs`` times; printed per task: the median milliseconds of a run
and the queries one run made (django's ``CaptureQueriesContext``):

- ``reservations_reconcile`` per kind with the state whole, and once drifted (a unit added
  in Redis before each run: found and repaired);
- ``reservations_sweep`` and ``holds_sweep`` per kind, with nothing waiting and no hold due
  (the held records' deadlines are a day away);
- ``provider_resend`` with no charge due (``PAYMENT_PROVIDER_RESEND_SECONDS`` a year) and
  with every unacknowledged charge due (made due again once at the start: each run sends
  what one run may, the next run the next ones).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/bench_periodic")

TITLE = "periodic bench"


def _sql(statement: str, *params) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


def _users(count: int) -> None:
    """``periodic-1`` .. ``periodic-<count>``, those missing added."""
    from django.contrib.auth import get_user_model

    have = get_user_model().objects.filter(username__startswith="periodic-").count()
    if have >= count:
        return
    _sql(
        f"INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
        f"is_active, date_joined) SELECT '!', 0, CONCAT('periodic-', seq), '', '', '', 0, 1, UTC_TIMESTAMP(6) "
        f"FROM seq_{have + 1}_to_{count}"
    )


def _voucher(records: int, buckets: int = 1):
    """A ``redis_lua`` voucher with ``records`` orders by as many buyers: six in ten
    confirmed, one paid, one held until tomorrow, one cancelled, one expired; split into
    ``buckets`` (a state each), the orders taken from bucket 0's row."""
    from datetime import timedelta

    from django.utils import timezone

    from inventory.models import Stock
    from inventory.totals import group_rows, totals_recount
    from orders.models import Voucher
    from orders.product import VOUCHER
    from orders.services import voucher_create, voucher_update

    title = f"{TITLE} {records}" + (f" in {buckets} buckets" if buckets > 1 else "")
    found = Voucher.objects.filter(title=title).first()
    if found:
        return found
    now = timezone.now()
    voucher = voucher_create(
        title=title,
        stock=0,
        begin_at=now - timedelta(days=1),
        end_at=now + timedelta(days=365),
        strategy="db_atomic",
        hold_seconds=600,
        listed=False,
        buckets=buckets,
    )
    row = group_rows(group_id=voucher.group_id)[0]
    _sql(
        "INSERT INTO orders_order (status, buyer_guard, created_at, user_id, voucher_id, stock_id, hold_until, "
        "releases) "
        "SELECT ELT(MOD(s.seq, 10) + 1, 'confirmed', 'confirmed', 'confirmed', 'confirmed', 'confirmed', "
        "'confirmed', 'paid', 'held', 'cancelled', 'expired'), IF(MOD(s.seq, 10) >= 8, NULL, u.id), "
        "UTC_TIMESTAMP(6) - INTERVAL s.seq SECOND, u.id, %s, %s, "
        "IF(MOD(s.seq, 10) = 7, UTC_TIMESTAMP(6) + INTERVAL 1 DAY, NULL), "
        f"IF(MOD(s.seq, 10) >= 8, 1, 0) FROM seq_1_to_{records} s JOIN auth_user u ON u.username = "
        "CONCAT('periodic-', s.seq)",
        voucher.pk,
        row,
    )
    taking = records - records // 10 * 2
    Stock.objects.filter(pk=row).update(quantity=1000, initial_quantity=taking + 1000)
    # The running totals, as the takes that wrote those orders would have kept them.
    totals_recount(VOUCHER, item_ids=[voucher.pk])
    return voucher_update(voucher=voucher, strategy="redis_lua")


def _pool(records: int):
    """A ``redis_lua`` pool with ``records`` draws, two per player: a quarter won gold, a
    quarter silver (claimed, held until tomorrow or forfeited), the rest no prize."""
    from datetime import timedelta

    from django.utils import timezone

    from inventory.models import Stock
    from inventory.totals import totals_recount
    from lottery.models import Pool
    from lottery.product import POOL
    from lottery.services import pool_create, pool_update, prize_create

    name = f"{TITLE} {records}"
    found = Pool.objects.filter(name=name).first()
    if found:
        return found
    now = timezone.now()
    pool = pool_create(
        name=name,
        draws_per_user=2,
        no_prize_weight=2,
        begin_at=now - timedelta(days=1),
        end_at=now + timedelta(days=365),
        strategy="db_atomic",
        hold_seconds=600,
        listed=False,
    )
    gold = prize_create(pool=pool, name="Gold", stock=0)
    silver = prize_create(pool=pool, name="Silver", stock=0)
    _sql(
        "INSERT INTO lottery_draw (status, seq, user_guard, created_at, user_id, pool_id, prize_id, stock_id, "
        "hold_until, releases) SELECT IF(MOD(s.seq, 4) >= 2, 'confirmed', ELT(MOD(s.seq, 3) + 1, 'claimed', 'held', "
        "'forfeited')), MOD(s.seq, 2) + 1, u.id, UTC_TIMESTAMP(6) - INTERVAL s.seq SECOND, u.id, %s, "
        "ELT(MOD(s.seq, 4) + 1, %s, %s, NULL, NULL), ELT(MOD(s.seq, 4) + 1, %s, %s, NULL, NULL), "
        "IF(MOD(s.seq, 4) < 2 AND MOD(s.seq, 3) = 1, "
        "UTC_TIMESTAMP(6) + INTERVAL 1 DAY, NULL), IF(MOD(s.seq, 4) < 2 AND MOD(s.seq, 3) = 2, 1, 0) "
        f"FROM seq_1_to_{records} s JOIN auth_user u ON u.username = CONCAT('periodic-', (s.seq + 1) DIV 2)",
        pool.pk,
        gold.pk,
        silver.pk,
        gold.stock_id,
        silver.stock_id,
    )
    for prize in (gold, silver):
        Stock.objects.filter(pk=prize.stock_id).update(quantity=1000, initial_quantity=records)
    totals_recount(POOL, item_ids=[pool.pk])
    return pool_update(pool=pool, strategy="redis_lua")


def _charges(count: int) -> None:
    """``count`` charges nobody acknowledged and ``count`` acknowledged; the first all due
    now (their callback left an hour ago)."""
    from payments.models import ProviderCharge

    have = ProviderCharge.objects.filter(reference__startswith="periodic-").count()
    if have < 2 * count:
        ProviderCharge.objects.filter(reference__startswith="periodic-").delete()
        _sql(
            "INSERT INTO payments_providercharge (reference, created_at, sent_at, callbacks, acknowledgements, "
            "acknowledged_at) SELECT CONCAT('periodic-', seq), UTC_TIMESTAMP(6) - INTERVAL 2 HOUR, "
            "UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, "
            f"1, IF(seq > {count}, 1, 0), IF(seq > {count}, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, NULL) "
            f"FROM seq_1_to_{2 * count}"
        )
    _charges_due()


def _charges_due() -> None:
    """Every unacknowledged charge due again, as before any resend; then the wait for InnoDB
    to purge the index entries the update left behind, which a resend would otherwise step
    over (no resend moves 100,000 charges at once)."""
    _sql(
        "UPDATE payments_providercharge SET sent_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR "
        "WHERE acknowledged_at IS NULL AND reference LIKE 'periodic-%%'"
    )
    from django.db import connection

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'")
            if int(cursor.fetchone()[1]) < 1000:
                return
        time.sleep(0.5)


def measured(action: Callable[[], object], runs: int, before: Callable[[], object] = lambda: None):
    """The median milliseconds of ``runs`` runs of ``action`` (``before`` runs first each
    time, unmeasured), and the queries of one more run; after one run unmeasured, so that
    what a first run does once (a comparison per user, a connection) is not counted."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    before()
    action()
    times = []
    for _ in range(runs):
        before()
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    before()
    with CaptureQueriesContext(connection) as captured:
        action()
    return statistics.median(times), len(captured.captured_queries)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="orders of the voucher, draws of the pool")
    parser.add_argument("--charges", type=int, default=100_000, help="charges due, and as many acknowledged")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)

    from .purchase import setup_django

    setup_django()
    from celery import current_app
    from django.conf import settings

    from inventory.redis_lua.client import reservations_client
    from inventory.redis_lua.item_states import item_reservations_load
    from inventory.tasks import holds_sweep, reservations_reconcile, reservations_sweep
    from inventory.totals import group_rows
    from lottery.product import POOL
    from orders.product import VOUCHER
    from payments.tasks import provider_resend

    start = time.perf_counter()
    _users(max(args.records, (args.records + 1) // 2))
    voucher = _voucher(args.records)
    pool = _pool(args.records)
    _charges(args.charges)
    reservations = reservations_client()
    for product, item in ((VOUCHER, voucher), (POOL, pool)):
        item_reservations_load(product, item=product.items().get(pk=item.pk), reservations=reservations)
    print(f"site ready in {time.perf_counter() - start:.1f} s: {args.records:,} orders, {args.records:,} draws, ")
    print(f"{args.charges:,} charges due and {args.charges:,} acknowledged; {args.runs} runs each")

    def drift() -> None:
        reservations.add_units(group_id=voucher.group_id, stock_id=group_rows(group_id=voucher.group_id)[0], units=1)

    logging.getLogger("inventory.redis_lua.reconcile").setLevel(logging.ERROR)  # the drift made on purpose
    settings.PAYMENT_CALLBACK_URL = settings.PAYMENT_CALLBACK_URL or "http://127.0.0.1:9/api/payments/callback"
    rows = []
    for kind in ("voucher", "pool"):
        rows.append((f"reservations_reconcile {kind}", measured(lambda k=kind: reservations_reconcile(k), args.runs)))
    drifted = measured(lambda: reservations_reconcile("voucher"), 3, drift)
    rows.append(("reservations_reconcile voucher, drifted", drifted))
    for kind in ("voucher", "pool"):
        rows.append((f"reservations_sweep {kind}", measured(lambda k=kind: reservations_sweep(k), args.runs)))
        rows.append((f"holds_sweep {kind}", measured(lambda k=kind: holds_sweep(k), args.runs)))
    resend_seconds = settings.PAYMENT_PROVIDER_RESEND_SECONDS
    settings.PAYMENT_PROVIDER_RESEND_SECONDS = 365 * 86_400
    rows.append(("provider_resend, none due", measured(provider_resend, args.runs)))
    settings.PAYMENT_PROVIDER_RESEND_SECONDS = resend_seconds
    rows.append((f"provider_resend, {args.charges:,} due", measured(provider_resend, args.runs)))
    current_app.control.purge()  # the callbacks sent: no worker here to post them

    width = max(len(name) for name, _ in rows)
    print(f"{'task':<{width}}  {'ms/run':>8}  {'queries':>7}")
    for name, (ms, queries) in rows:
        print(f"{name:<{width}}  {ms:>8.1f}  {queries:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
