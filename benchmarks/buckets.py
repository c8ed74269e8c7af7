"""One hot voucher, one row against several buckets, per strategy, with every guard held a while.

    .venv/bin/python -m benchmarks.buckets [--processes 16] [--seconds 5] [--rounds 3]
        [--buckets 8] [--guard-hold-ms 5] [--strategies db_pessimistic,db_atomic,redis_lock]

``GUARD_HOLD_MS`` holds each strategy's guard (its row lock, its item lock) that long after
the stock write, as a database or a lock server across a network holds it: one row then sells
at most about 1000 / GUARD_HOLD_MS a second, whatever the machine, and buckets sell in
parallel. Each round runs every strategy on one row and on ``--buckets`` buckets, alternating,
so that drift in the machine's speed hits all alike. Printed: sales per second (median of the
rounds) and the ratio of the buckets to one row in the same run.

Then a sell-out per strategy: ``--sellout-units`` units in ``--buckets`` buckets and three
buyers for each unit. Printed: units sold, buyers told sold out, and the units left once the
buyers stopped: a unit left while a buyer was told sold out is one stranded in a bucket
(target 0: sold out is answered only when every bucket is empty).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass

from .cpu import machine_ticks, mariadb_pid, proc_cpu
from .purchase import run, setup_django


@dataclass
class Spent:
    """What one run cost the machine: how busy its cores were, MariaDB's CPU, and InnoDB's
    row-lock waits and log fsyncs, the last three per sale."""

    busy: float = 0.0
    mariadb_ms: float = 0.0
    lock_wait_ms: float = 0.0
    fsyncs: float = 0.0


def _innodb() -> tuple[float, float]:
    """InnoDB's row-lock wait time so far (ms) and its log fsyncs."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_row_lock_time', 'Innodb_data_fsyncs')")
        status = dict(cursor.fetchall())
    return float(status.get("Innodb_row_lock_time", 0)), float(status.get("Innodb_data_fsyncs", 0))


def measured(strategy: str, processes: int, seconds: float, users: int, buckets: int) -> tuple[float, Spent]:
    """Sales per second of one run, and what it cost."""
    database = mariadb_pid()
    ticks, db_cpu, (waited, fsyncs) = machine_ticks(), proc_cpu(database) if database else 0.0, _innodb()
    rate, _ = run(strategy, processes, seconds, users, buckets=buckets)
    busy, total = (after - before for after, before in zip(machine_ticks(), ticks, strict=True))
    sales = max(1.0, rate * seconds)
    waited_after, fsyncs_after = _innodb()
    return rate, Spent(
        busy=busy / max(1, total),
        mariadb_ms=((proc_cpu(database) if database else 0.0) - db_cpu) * 1000 / sales,
        lock_wait_ms=(waited_after - waited) / sales,
        fsyncs=(fsyncs_after - fsyncs) / sales,
    )


def sellout(strategy: str, processes: int, units: int, buckets: int) -> tuple[int, int, int]:
    """Units sold, buyers refused ``sold_out``, and units left, of a voucher of ``units`` in
    ``buckets`` bought by three times as many buyers."""
    from orders.models import Voucher
    from orders.selectors import voucher_get

    buyers = 3 * units // processes + 1
    rate, refused = run(strategy, processes, 600, buyers, buckets=buckets, stock=units)
    voucher = Voucher.objects.filter(title=f"bench {strategy}").latest("id")
    left = voucher_get(voucher_id=voucher.pk).stock_left
    return units - left, refused, left


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--guard-hold-ms", type=int, default=5)
    parser.add_argument("--sellout-units", type=int, default=600)
    parser.add_argument("--strategies", default="db_pessimistic,db_atomic,redis_lock", help="comma-separated")
    args = parser.parse_args(argv)
    setup_django()
    import redis
    from django.conf import settings

    from harness.machine import describe

    # Forked buyers inherit the settings as they are here.
    settings.GUARD_HOLD_MS = args.guard_hold_ms
    strategies = args.strategies.split(",")
    print("# One hot voucher: one row against buckets\n")
    print(f"Machine: {describe(redis.Redis.from_url(settings.LOCK_REDIS_URL))}; MariaDB at 127.0.0.1")
    print(f"{args.processes} processes, {args.seconds:g} s per run, {args.rounds} rounds, ", end="")
    print(f"GUARD_HOLD_MS={settings.GUARD_HOLD_MS}, RACE_WINDOW_MS={settings.RACE_WINDOW_MS}\n")
    users_per_process = int(args.seconds * 3000 / args.processes) + 100
    shapes = (1, args.buckets)
    rates: dict[tuple[str, int], list[float]] = {(s, b): [] for s in strategies for b in shapes}
    spent: dict[tuple[str, int], Spent] = {}
    for round_ in range(args.rounds):
        for strategy in strategies:
            for buckets in shapes:
                print(f"  round {round_ + 1}: {strategy}, {buckets} bucket(s) ...", file=sys.stderr, flush=True)
                rate, cost = measured(strategy, args.processes, args.seconds, users_per_process, buckets)
                rates[strategy, buckets].append(rate)
                spent[strategy, buckets] = cost  # the last round's
    print(f"| strategy | 1 row, sales/s | {args.buckets} buckets, sales/s | x one row | rounds (1 row; buckets) |")
    print("|---|---|---|---|---|")
    for strategy in strategies:
        one, many = rates[strategy, 1], rates[strategy, args.buckets]
        rounds = ", ".join(f"{v:.0f}" for v in one) + "; " + ", ".join(f"{v:.0f}" for v in many)
        ratio = statistics.median(many) / statistics.median(one)
        print(f"| {strategy} | {statistics.median(one):.0f} | {statistics.median(many):.0f} | {ratio:.2f} | {rounds} |")

    print("\nWhere the time goes (last round): cores busy, and per sale MariaDB's CPU, row-lock waits, log fsyncs\n")
    print("| strategy | buckets | cores busy | MariaDB CPU ms | row-lock wait ms | fsyncs |")
    print("|---|---|---|---|---|---|")
    for (strategy, buckets), cost in spent.items():
        print(
            f"| {strategy} | {buckets} | {cost.busy:.0%} | {cost.mariadb_ms:.2f} | {cost.lock_wait_ms:.2f} "
            f"| {cost.fsyncs:.2f} |"
        )
    print(f"\nSell-out: {args.sellout_units} units in {args.buckets} buckets, three buyers per unit\n")
    print("| strategy | sold | told sold out | units left (stranded) |")
    print("|---|---|---|---|")
    for strategy in strategies:
        print(f"  sell-out: {strategy} ...", file=sys.stderr, flush=True)
        sold, refused, left = sellout(strategy, args.processes, args.sellout_units, args.buckets)
        print(f"| {strategy} | {sold} | {refused} | {left} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
