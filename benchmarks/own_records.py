"""What a user's own lists cost as the user's history grows: ``GET /api/orders``, ``GET /api/draws``
and the pages ``/orders/`` and ``/draws/``, for a user with few records and one with many.

    .venv/bin/python -m benchmarks.own_records [--small 10] [--big 1000] [--repeat 7]

Two users are made once (and kept between runs in the benchmark's database): each with
``--small`` or ``--big`` orders of a voucher with a payment window and as many draws of a pool
with a claim window, in every state a record can be in (confirmed, held, paid or claimed,
cancelled, expired or forfeited), the released orders with a refunded payment and some held
ones with a payment waiting for its confirmation. Each call is made through Django's test
client, as its user (a bearer token for the API, a session for the pages): each list as it
opens, then ten records a page through the API, the newest page and the oldest (reached
through the pages' Link headers, not timed). Printed per call: the queries it made and the
median time of ``--repeat`` calls, for each user, with the big/small ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_bench")

# Each call as a user makes it: the list as it opens, then through the API ten records a page,
# the newest and the oldest (the last page, reached through the Link headers, not timed).
CALLS = ("/api/orders", "/api/draws", "/orders/", "/draws/")
LIMITED = ("/api/orders?limit=10", "/api/draws?limit=10")
# One state per record in turn, so that every state is on every page.
ORDER_STATES = ("confirmed", "held", "paid", "cancelled", "expired")
DRAW_STATES = ("confirmed", "held", "claimed", "forfeited")


def _records_made(username: str, count: int):
    """The user named ``username`` with ``count`` orders and ``count`` draws, made once."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from inventory.totals import group_rows
    from lottery.models import Draw
    from lottery.services import pool_create, prize_create
    from orders.models import Order
    from orders.services import voucher_create
    from payments.models import Payment

    user, _ = get_user_model().objects.get_or_create(username=username)
    if Order.objects.filter(user=user).count() == count and Draw.objects.filter(user=user).count() == count:
        return user
    now = timezone.now()
    window = {"begin_at": now - timedelta(days=1), "end_at": now + timedelta(days=365), "hold_seconds": 600}
    voucher = voucher_create(title=f"bench {username}", stock=count, strategy="db_atomic", **window)
    pool = pool_create(
        name=f"bench {username}", draws_per_user=count, no_prize_weight=1, strategy="db_atomic", **window
    )
    prize = prize_create(pool=pool, name="Gold", stock=count)
    later, before = now + timedelta(minutes=10), now - timedelta(minutes=10)
    # No one-per-user backstop (buyer_guard, user_guard NULL), as the naive strategies write:
    # one user may then hold many records of one item.
    (row,) = group_rows(group_id=voucher.group_id)
    orders = Order.objects.bulk_create(
        Order(
            user=user,
            voucher=voucher,
            stock_id=row,
            status=ORDER_STATES[n % len(ORDER_STATES)],
            hold_until=None if n % len(ORDER_STATES) == 0 else (later if n % len(ORDER_STATES) == 1 else before),
        )
        for n in range(count)
    )
    payments = []
    for n, order in enumerate(orders):
        if order.status in ("cancelled", "expired"):
            payments.append(
                Payment(
                    order=order,
                    reference=f"bench-{order.pk}",
                    status="refunded",
                    refunded_at=now,
                    refund_reason=order.status,
                )
            )
        elif order.status == "held" and n % 2:
            payments.append(Payment(order=order, reference=f"bench-{order.pk}", open_guard=order.pk))
    Payment.objects.bulk_create(payments)
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
    # A second apart, newest last, as records made over time are.
    with connection.cursor() as cursor:
        for table in ("orders_order", "lottery_draw"):
            cursor.execute(
                f"UPDATE {table} SET created_at = TIMESTAMPADD(SECOND, id - %s, created_at) WHERE user_id = %s",
                [10**9, user.pk],
            )
    return user


def _measure(client, path: str, repeat: int) -> tuple[int, float, int]:
    """(queries, median ms, status) of ``repeat`` GETs of ``path``: the fewest queries of the
    calls, since a bearer token's check reads the revocations once a second (docs/api.md), in
    whichever call comes then."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    times, queries, status = [], [], 0
    for _ in range(repeat):
        reset_queries()  # the log keeps 9,000 queries, after which the capture counts none
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(path)
            times.append((time.perf_counter() - started) * 1000)
        queries.append(len(captured))
        status = response.status_code
    return min(queries), statistics.median(times), status


def _oldest_page(client, path: str) -> str:
    """The URL of the last page of ``path``, following each page's Link to the next."""
    while True:
        link = client.get(path).get("Link")
        if link is None:
            return path
        path = link[1 : link.index(">")].removeprefix("http://testserver")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--big", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)

    from .purchase import setup_django

    setup_django()
    from django.test import Client
    from django.test.utils import setup_test_environment

    from accounts.services import token_issue

    setup_test_environment()  # the test client's host, and no e-mail sent

    rows = []
    measured = {}
    for size in (args.small, args.big):
        user = _records_made(f"bench-own-{size}", size)
        api = Client(headers={"Authorization": f"Bearer {token_issue(user=user)}"})
        pages = Client()
        pages.force_login(user)
        paths = {path: path for path in (*CALLS, *LIMITED)}
        paths |= {f"{path}, oldest page": _oldest_page(api, path) for path in LIMITED}
        for name, path in paths.items():
            client = api if path.startswith("/api/") else pages
            _measure(client, path, 1)  # warm: the first call pays for imports and caches
            measured[(name, size)] = _measure(client, path, args.repeat)
    print(f"\n{args.small} against {args.big} records of one user (median of {args.repeat} calls)\n")
    print(f"| call | queries, {args.small} | queries, {args.big} | ms, {args.small} | ms, {args.big} | x |")
    print("|---|---|---|---|---|---|")
    for path in dict.fromkeys(name for name, _ in measured):
        (q_small, ms_small, s_small), (q_big, ms_big, s_big) = measured[(path, args.small)], measured[(path, args.big)]
        if s_small != 200 or s_big != 200:
            sys.exit(f"{path} answered {s_small} and {s_big}")
        rows.append(f"| {path} | {q_small} | {q_big} | {ms_small:.1f} | {ms_big:.1f} | {ms_big / ms_small:.2f} |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
