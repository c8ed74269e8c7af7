"""What the staff's pages and ``manage.py audit`` cost on a site with a long history.

    DATABASE_URL=mysql://root:@127.0.0.1:3306/flashsale_admin \\
        .venv/bin/python -m benchmarks.admin [--users 100000] [--orders 400000] [--draws 200000] [--repeat 5]

The first run fills the database in bulk (MariaDB's ``seq_1_to_N``, 10-30 s):
``--users`` users, ``--orders`` orders over 20 vouchers in every status (30% confirmed, 40%
paid, 10% held, cancelled, expired), a paid payment and its provider charge for each paid
order and a refunded one for each released order, and ``--draws`` draws over 5 pools of 4
prizes (one in seven without a prize), every stock consistent with its records so that the
audit passes. A later run against the same database reuses them. Then each admin page is
fetched once, then ``--repeat`` times as a superuser, and ``manage.py audit`` run up to 3
times; printed: the queries each makes, and its median time.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from datetime import timedelta

from .purchase import setup_django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_admin")

VOUCHERS, POOLS, PRIZES = 20, 5, 4
PREFIX = "bench-admin"


def _say(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def _sql(statement: str, params: list | tuple = ()) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


def _seed_users(users: int) -> int:
    """The first id of ``users`` fresh users (usernames ``bench-admin-<n>``)."""
    _sql(
        "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff,"
        " is_active, date_joined)"
        f" SELECT '!', 0, CONCAT('{PREFIX}-', seq), '', '', '', 0, 1, NOW(6) FROM seq_1_to_{users}"
    )
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=f"{PREFIX}-1").pk


def _seed_orders(orders: int, users: int, first_user: int) -> None:
    from inventory.totals import group_rows, totals_recount
    from orders.models import Order
    from orders.product import VOUCHER
    from orders.services import voucher_create

    now = _now()
    window = {"begin_at": now - timedelta(days=30), "end_at": now + timedelta(days=30)}
    vouchers = [
        voucher_create(title=f"{PREFIX} voucher {n}", stock=0, strategy="db_atomic", hold_seconds=600, **window)
        for n in range(1, VOUCHERS + 1)
    ]
    first_voucher = vouchers[0].pk
    assert [v.pk for v in vouchers] == list(range(first_voucher, first_voucher + VOUCHERS))
    rows = [group_rows(group_id=voucher.group_id)[0] for voucher in vouchers]
    # The voucher seq % 20, its buyers distinct (no audit finds a duplicate), and the status by
    # k = (seq div 20) % 10: 0-2 confirmed, 3-6 paid, 7 held, 8 cancelled, 9 expired.
    status = (
        "ELT(k + 1, 'confirmed', 'confirmed', 'confirmed', 'paid', 'paid', 'paid', 'paid', 'held',"
        " 'cancelled', 'expired')"
    )
    _say(f"{orders:,} orders ...")
    _sql(
        "INSERT INTO orders_order (status, buyer_guard, created_at, user_id, voucher_id, stock_id, hold_until,"
        " settled_at, released_at, releases)"
        f" SELECT {status}, u, created, u, %s + MOD(seq, {VOUCHERS}),"
        f"  ELT(MOD(seq, {VOUCHERS}) + 1, {', '.join(map(str, rows))}),"
        "  IF(k < 3, NULL, IF(k = 7, %s, created + INTERVAL 10 MINUTE)),"
        "  IF(k BETWEEN 3 AND 6, created + INTERVAL 1 MINUTE, NULL),"
        "  IF(k >= 8, created + INTERVAL 2 MINUTE, NULL), IF(k >= 8, 1, 0)"
        f" FROM (SELECT seq, MOD(seq DIV {VOUCHERS}, 10) AS k, %s + MOD(seq DIV {VOUCHERS}, %s) AS u,"
        "  %s - INTERVAL (%s - seq) SECOND AS created"
        f"  FROM seq_1_to_{orders}) AS s",
        [first_voucher, now + timedelta(hours=1), first_user, users, now, orders],
    )
    _say("payments ...")
    first_order = Order.objects.filter(voucher__in=vouchers).order_by("id").values_list("id", flat=True).first()
    for status, outcome in (("paid", "'paid', created_at + INTERVAL 1 MINUTE, NULL, ''"),
                            ("cancelled", "'refunded', NULL, created_at + INTERVAL 3 MINUTE, 'cancelled'"),
                            ("expired", "'refunded', NULL, created_at + INTERVAL 3 MINUTE, 'expired'")):  # fmt: skip
        _sql(
            "INSERT INTO payments_payment (reference, status, settled_at, refunded_at, refund_reason, created_at,"
            " order_id)"
            f" SELECT CONCAT('{PREFIX}-', id), {outcome}, created_at + INTERVAL 30 SECOND, id FROM orders_order"
            " WHERE status = %s AND id >= %s",
            [status, first_order],
        )
    _sql(
        "INSERT INTO payments_providercharge (reference, created_at, sent_at, callbacks, acknowledgements,"
        " acknowledged_at, refunded_at)"
        " SELECT reference, created_at, created_at, 1, 1, created_at, refunded_at FROM payments_payment"
        f" WHERE reference LIKE '{PREFIX}-%%'"
    )
    # Each voucher supplied what its orders hold, and 1,000 more left.
    for voucher, row in zip(vouchers, rows, strict=True):
        taking = Order.objects.filter(voucher=voucher, status__in=("confirmed", "held", "paid")).count()
        _sql(
            "UPDATE inventory_stock SET initial_quantity = %s, quantity = 1000 WHERE id = %s",
            [taking + 1000, row],
        )
    # The running totals, as the takes that wrote those orders would have kept them.
    totals_recount(VOUCHER, item_ids=[voucher.pk for voucher in vouchers])


def _seed_draws(draws: int, users: int, first_user: int) -> None:
    from inventory.totals import totals_recount
    from lottery.models import Draw, Prize
    from lottery.product import POOL
    from lottery.services import pool_create, prize_create

    now = _now()
    window = {"begin_at": now - timedelta(days=30), "end_at": now + timedelta(days=30)}
    pools = []
    for n in range(1, POOLS + 1):
        pool = pool_create(
            name=f"{PREFIX} pool {n}", draws_per_user=1, no_prize_weight=10, strategy="db_atomic",
            hold_seconds=600, **window,
        )  # fmt: skip
        for p in range(1, PRIZES + 1):
            prize_create(pool=pool, name=f"prize {p}", stock=0)
        pools.append(pool)
    first_pool = pools[0].pk
    first_prize = Prize.objects.filter(pool_id=first_pool).order_by("id").first().pk
    prizes = Prize.objects.filter(pool_id__in=[p.pk for p in pools]).order_by("id")
    assert list(prizes.values_list("id", flat=True)) == list(range(first_prize, first_prize + POOLS * PRIZES))
    # The n-th prize of the seeded ones, and its stock row.
    n = f"MOD(seq, {POOLS}) * {PRIZES} + MOD(seq DIV {POOLS}, {PRIZES})"
    rows = ", ".join(map(str, prizes.values_list("stock_id", flat=True)))
    # Pool seq % 5, prize (seq div 5) % 4 of it, none when seq % 7 = 0 (confirmed); a prize's
    # draw by (seq div 7) % 4: confirmed, held, claimed, forfeited.
    _say(f"{draws:,} draws ...")
    _sql(
        "INSERT INTO lottery_draw (status, seq, user_guard, created_at, user_id, pool_id, prize_id, stock_id,"
        " hold_until, settled_at, released_at, releases)"
        " SELECT IF(no_prize, 'confirmed', ELT(k + 1, 'confirmed', 'held', 'claimed', 'forfeited')), 1, u, created, u,"
        f"  %s + MOD(seq, {POOLS}), IF(no_prize, NULL, %s + {n}), IF(no_prize, NULL, ELT({n} + 1, {rows})),"
        "  IF(no_prize OR k = 0, NULL, IF(k = 1, %s, created + INTERVAL 10 MINUTE)),"
        "  IF(NOT no_prize AND k = 2, created + INTERVAL 1 MINUTE, NULL),"
        "  IF(NOT no_prize AND k = 3, created + INTERVAL 10 MINUTE, NULL), IF(NOT no_prize AND k = 3, 1, 0)"
        f" FROM (SELECT seq, MOD(seq, 7) = 0 AS no_prize, MOD(seq DIV 7, 4) AS k, %s + MOD(seq DIV {POOLS}, %s) AS u,"
        f"  %s - INTERVAL (%s - seq) SECOND AS created FROM seq_1_to_{draws}) AS s",
        [first_pool, first_prize, now + timedelta(hours=1), first_user, users, now, draws],
    )
    for prize in Prize.objects.filter(pool_id__in=[p.pk for p in pools]):
        awarded = Draw.objects.filter(prize=prize, status__in=("confirmed", "held", "claimed")).count()
        _sql(
            "UPDATE inventory_stock SET initial_quantity = %s, quantity = 100 WHERE id = %s",
            [awarded + 100, prize.stock_id],
        )
    totals_recount(POOL, item_ids=[pool.pk for pool in pools])


def _now():
    from django.utils import timezone

    return timezone.now().replace(microsecond=0)


def seed(args) -> None:
    from orders.models import Voucher

    if Voucher.objects.filter(title=f"{PREFIX} voucher 1").exists():
        _say("the site is there already (drop the database to make another)")
        return
    started = time.perf_counter()
    _say(f"{args.users:,} users ...")
    first_user = _seed_users(args.users)
    _seed_orders(args.orders, args.users, first_user)
    _seed_draws(args.draws, args.users, first_user)
    for table in ("auth_user", "orders_order", "payments_payment", "payments_providercharge", "lottery_draw"):
        _sql(f"ANALYZE TABLE {table}")
    _say(f"seeded in {time.perf_counter() - started:.0f} s")


class Counted:
    """The queries of a block, counted by the connection's execute wrapper (no DEBUG needed)."""

    def __init__(self) -> None:
        self.queries = 0

    def __call__(self, execute, sql, params, many, context):
        self.queries += 1
        return execute(sql, params, many, context)


def _timed(call, repeat: int) -> tuple[int, float]:
    from django.db import connection

    times, counted = [], Counted()
    for _ in range(repeat):
        counted.queries = 0
        with connection.execute_wrapper(counted):
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
    return counted.queries, statistics.median(times) * 1000


def measure(args) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from lottery.models import Draw, Pool
    from orders.models import Order, Voucher
    from payments.models import Payment

    admin, _ = get_user_model().objects.get_or_create(
        username=f"{PREFIX}-staff", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client(HTTP_HOST="localhost")
    client.force_login(admin)
    voucher = Voucher.objects.get(title=f"{PREFIX} voucher 1")
    pool = Pool.objects.get(name=f"{PREFIX} pool 1")
    print(
        f"site: {get_user_model().objects.count():,} users, {Order.objects.count():,} orders, "
        f"{Payment.objects.count():,} payments, {Draw.objects.count():,} draws"
    )
    pages = [
        "/admin/orders/order/",
        "/admin/orders/order/?p=100",
        "/admin/orders/order/?items=all&p=100",
        "/admin/orders/order/?status__exact=held",
        f"/admin/orders/order/?voucher__id__exact={voucher.pk}",
        f"/admin/orders/order/?q={PREFIX}-4242",
        "/admin/lottery/draw/",
        "/admin/lottery/draw/?p=100",
        "/admin/lottery/draw/?items=all&p=100",
        "/admin/lottery/draw/?status__exact=claimed",
        f"/admin/lottery/draw/?pool__id__exact={pool.pk}",
        f"/admin/lottery/draw/?q={PREFIX}-4242",
        "/admin/orders/voucher/",
        "/admin/lottery/pool/",
        f"/admin/orders/voucher/{voucher.pk}/change/",
        f"/admin/orders/voucher/{voucher.pk}/payments-audit/",
        f"/admin/lottery/pool/{pool.pk}/change/",
    ]
    print(f"{'what':<50} {'queries':>7} {'ms':>8}")
    for page in pages:
        if client.get(page).status_code != 200:
            print(f"GET {page:<46} {'-':>7} {'-':>8}")
            continue

        def get(page=page):
            client.get(page)

        queries, ms = _timed(get, args.repeat)
        print(f"GET {page:<46} {queries:>7} {ms:>8.0f}")

    def audit():
        try:
            call_command("audit", stdout=io.StringIO())
        except SystemExit as exit_:
            print(f"  audit exited {exit_.code}", file=sys.stderr)

    queries, ms = _timed(audit, min(args.repeat, 3))
    print(f"{'manage.py audit':<50} {queries:>7} {ms:>8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--orders", type=int, default=400_000)
    parser.add_argument("--draws", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5, help="Fetches of each page; the median is printed.")
    args = parser.parse_args()
    if args.users * 1 < max(args.orders // VOUCHERS, args.draws // POOLS):
        parser.error("--users must be at least orders / 20 and draws / 5: each voucher's buyers are distinct")
    setup_django()
    seed(args)
    measure(args)


if __name__ == "__main__":
    main()
