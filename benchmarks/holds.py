"""What the unit's lifecycle costs: a purchase with a payment window against one without,
per strategy, and the release of many expired holds at once.

    .venv/bin/python -m benchmarks.holds [--processes 8] [--seconds 5] [--rounds 3]
        [--strategies db_atomic,...] [--expired 100000] [--sweepers 1]

1. Purchases per second of one voucher of ample stock, from several processes, with
   a payment window (``hold_seconds``) of 0 and 600, the two alternated within every round so that
   drift in the machine's speed hits both alike (``benchmarks.purchase``'s run). Printed:
   the median of each and the ratio with/without, per strategy; and the CPU each purchase
   cost, the buying processes', MariaDB's and Redis' together, with its ratio. On a shared
   machine the throughput swings with the neighbours' load, while the CPU a purchase
   spends barely does: the second ratio is the one that shows a few per cent.
2. ``--expired`` held orders past their deadline, written in bulk, released by the sweep
   (``inventory.holds.holds_expire_all``, 1,000 per transaction) from ``--sweepers``
   processes at once; printed: the seconds it took, the rows per second, and the audit
   (each unit returned exactly once, the stock whole again).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

from .cpu import mariadb_pid, proc_cpu, redis_cpu
from .processes import run_together
from .purchase import run as purchase_run
from .purchase import setup_django


def _sweeper(start, results) -> None:
    from django.db import connections

    from inventory.holds import holds_expire_all
    from orders.product import VOUCHER

    start.wait()
    released = holds_expire_all(VOUCHER)
    connections.close_all()
    results.put(released)


def expire_run(strategy: str, expired: int, sweepers: int) -> tuple[float, object]:
    """Seconds to release ``expired`` due holds of one voucher under ``strategy``, and its audit."""
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.db import connections
    from django.utils import timezone

    from inventory.models import Stock
    from inventory.totals import group_rows
    from orders.models import Order, Voucher
    from orders.selectors import voucher_audit
    from orders.services import voucher_create, voucher_update

    now = timezone.now()
    # Earlier runs' holds would be swept with this one's.
    Order.objects.filter(status=Order.Status.HELD).update(status=Order.Status.EXPIRED, hold_until=None)
    voucher = voucher_create(
        title=f"bench expiry {strategy}",
        stock=expired,
        begin_at=now - timedelta(minutes=1),
        end_at=now + timedelta(hours=1),
        strategy="db_atomic",
    )
    (row,) = group_rows(group_id=voucher.group_id)
    # A buyer each, as a voucher has: one buyer of every hold made redis_lua's release of a
    # unit parse and write that buyer's 100,000 take numbers, for each unit, in one script.
    users = get_user_model().objects
    made = users.filter(username__startswith="bench-holder-").count()
    users.bulk_create(
        (get_user_model()(username=f"bench-holder-{n}", password="!") for n in range(made, expired)), batch_size=10_000
    )
    buyers = list(users.filter(username__startswith="bench-holder-").order_by("pk").values_list("pk", flat=True))
    due = now - timedelta(seconds=1)
    for first in range(0, expired, 10_000):
        Order.objects.bulk_create(
            Order(
                user_id=buyers[first + n],
                voucher=voucher,
                stock_id=row,
                status=Order.Status.HELD,
                hold_until=due,
                buyer_guard=buyers[first + n],  # the one-per-user key
            )
            for n in range(min(10_000, expired - first))
        )
    # Every unit held by an order, as the takes would have left the stock and its running total.
    Stock.objects.filter(pk=row).update(quantity=0, taken=expired)
    Voucher.objects.filter(pk=voucher.pk).update(hold_seconds=600)
    if strategy != "db_atomic":
        voucher_update(voucher=Voucher.objects.get(pk=voucher.pk), strategy=strategy)
    connections.close_all()
    started = time.perf_counter()
    released = sum(run_together(_sweeper, [() for _ in range(sweepers)], timeout=600))
    seconds = time.perf_counter() - started
    assert released == expired, (released, expired)
    return seconds, voucher_audit(voucher_id=voucher.pk)


def purchase_costed(strategy: str, processes: int, seconds: float, users: int, *, window: int) -> tuple[float, float]:
    """``benchmarks.purchase``'s run, and the CPU milliseconds each purchase cost: the buying
    processes' (forked and joined by the run, so counted in this process's children),
    MariaDB's and Redis' (the broker's and the locks' server), over the purchases made."""
    import redis
    from django.conf import settings

    servers = {redis.Redis.from_url(url).connection_pool.connection_kwargs["port"]: url
               for url in (settings.LOCK_REDIS_URL, settings.CELERY_BROKER_URL)}  # fmt: skip
    clients = [redis.Redis.from_url(url) for url in servers.values()]
    mariadb = mariadb_pid()

    def used() -> float:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        servers_cpu = sum(redis_cpu(client) for client in clients) + (proc_cpu(mariadb) if mariadb else 0.0)
        return children.ru_utime + children.ru_stime + servers_cpu

    before = used()
    rate, _ = purchase_run(strategy, processes, seconds, users, window=window)
    spent = used() - before
    # Each buyer's rate is over the seconds it bought for; redis_lua's orders are written
    # later, by a worker this run has not, so the purchases are counted from the rates.
    return rate, 1000 * spent / max(rate * seconds, 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strategies", default="db_pessimistic,db_atomic,redis_lock", help="comma-separated")
    parser.add_argument("--expired", type=int, default=100_000, help="held orders past due to release; 0: skip")
    parser.add_argument("--sweepers", type=int, default=1, help="processes sweeping at once")
    parser.add_argument("--expiry-strategies", default="db_atomic,redis_lua", help="comma-separated")
    args = parser.parse_args(argv)
    setup_django()
    import redis
    from django.conf import settings

    from harness.machine import describe

    strategies = [name for name in args.strategies.split(",") if name]
    print("# The lifecycle's cost\n")
    print(f"Machine: {describe(redis.Redis.from_url(settings.LOCK_REDIS_URL))}; MariaDB at 127.0.0.1\n")
    if strategies:
        print(
            f"## A purchase with a payment window\n\n{args.processes} processes, {args.seconds:g} s per run, ", end=""
        )
        print(f"{args.rounds} rounds, RACE_WINDOW_MS={settings.RACE_WINDOW_MS}\n")
        users = int(args.seconds * 3000 / args.processes) + 100
        rates: dict[tuple[str, int], list[float]] = {}
        costs: dict[tuple[str, int], list[float]] = {}
        for round_ in range(args.rounds):
            for strategy in strategies:
                # Alternate which goes first, so that neither always runs on a warmer machine.
                for window in (0, 600) if round_ % 2 == 0 else (600, 0):
                    print(f"  round {round_ + 1}: {strategy}, window {window} s ...", file=sys.stderr, flush=True)
                    rate, cpu_ms = purchase_costed(strategy, args.processes, args.seconds, users, window=window)
                    rates.setdefault((strategy, window), []).append(rate)
                    costs.setdefault((strategy, window), []).append(cpu_ms)
        print("| strategy | no window /s | 600 s window /s | with / without | CPU ms, no window | CPU ms, window "
              "| CPU with / without |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        for strategy in strategies:
            without, held = rates[(strategy, 0)], rates[(strategy, 600)]
            ratio = statistics.median(held) / statistics.median(without)
            bare, windowed = costs[(strategy, 0)], costs[(strategy, 600)]
            cpu_ratio = statistics.median(windowed) / statistics.median(bare)
            print(
                f"| {strategy} | {statistics.median(without):.0f} ({', '.join(f'{v:.0f}' for v in without)}) "
                f"| {statistics.median(held):.0f} ({', '.join(f'{v:.0f}' for v in held)}) | {ratio:.3f} "
                f"| {statistics.median(bare):.3f} ({', '.join(f'{v:.3f}' for v in bare)}) "
                f"| {statistics.median(windowed):.3f} ({', '.join(f'{v:.3f}' for v in windowed)}) | {cpu_ratio:.3f} |"
            )
    if args.expired:
        print(f"\n## {args.expired:,} expired holds released by {args.sweepers} sweeping process(es)\n")
        print("| strategy | seconds | rows/s | released | returned twice | stock | audit |")
        print("|---|---|---|---|---|---|---|")
        for strategy in [name for name in args.expiry_strategies.split(",") if name]:
            print(f"  expiry: {strategy} ...", file=sys.stderr, flush=True)
            seconds, audit = expire_run(strategy, args.expired, args.sweepers)
            verdict = "ok" if audit.ok else "BROKEN"
            print(
                f"| {strategy} | {seconds:.2f} | {args.expired / seconds:,.0f} | {audit.holds.released:,} "
                f"| {audit.holds.returned_twice} | {audit.stock:,}/{audit.supplied:,} | {verdict} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
