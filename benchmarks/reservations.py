"""The redis_lua script on its own: reservations per second against Redis round trips that
do nothing, from several processes, in one run.

    .venv/bin/python -m benchmarks.reservations [--processes 4] [--seconds 3] [--rounds 3]

Three runs, alternated over the rounds so that drift in the machine's speed hits all alike:

- ``PING``: one Redis round trip that does nothing, the ceiling of anything in Redis;
- ``RESERVE voucher``: the script on a group of one row, limit one per user (a purchase);
- ``RESERVE pool``: the script on a pool of 5 rows with a weight of no prize, limit 3 (a draw).

Every call reserves (distinct users, stock that never runs out), so each also appends its
pending entry to the stream. Printed: calls per second (median of the rounds) and each
one's ratio to ``PING``. No database and no Django request: the figures bound what the
strategy can reach once authentication and the item's read cost almost nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta

import redis

from harness.django_setup import setup_django_without_database
from harness.machine import describe

from .processes import run_together

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")
VOUCHER_GROUP, POOL_GROUP = 900_000_001, 900_000_002
USERS_PER_PROCESS = 10_000_000


def _prepare(client: redis.Redis) -> None:
    from django.utils import timezone

    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.values import GroupKeys, Rules

    reservations = Reservations(client)
    now = timezone.now()
    window = {"begin_at": now - timedelta(minutes=1), "end_at": now + timedelta(hours=1)}
    for group in (VOUCHER_GROUP, POOL_GROUP):
        client.delete(*GroupKeys.of(group).all())
    reservations.load(group_id=VOUCHER_GROUP, rules=Rules(**window, limit=1), stock={1: 10**12})
    pool_stock = {n: 10**11 for n in range(1, 6)}
    reservations.load(group_id=POOL_GROUP, rules=Rules(**window, limit=3, no_take=10**11), stock=pool_stock)


def _caller(kind: str, first_user: int, seconds: float, start, results) -> None:
    from inventory.redis_lua.client import Reservations

    client = redis.Redis.from_url(REDIS_URL)
    reservations = Reservations(client)
    rand = random.Random(first_user).random
    user = first_user
    start.wait()
    calls, stop = 0, time.perf_counter() + seconds
    while time.perf_counter() < stop:
        if kind == "PING":
            client.ping()
        else:
            group = VOUCHER_GROUP if kind == "RESERVE voucher" else POOL_GROUP
            answer = reservations.reserve(group_id=group, user_id=user, rand=rand())
            assert answer.refusal is None, answer
            user += 1
        calls += 1
    results.put(calls / seconds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    setup_django_without_database()
    client = redis.Redis.from_url(REDIS_URL)
    print(f"machine: {describe(client)}")
    print(f"{args.processes} processes x {args.seconds:g} s, {args.rounds} rounds, Redis at {REDIS_URL}")
    kinds = ["PING", "RESERVE voucher", "RESERVE pool"]
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    for round_number in range(args.rounds):
        for kind in kinds if round_number % 2 == 0 else reversed(kinds):
            _prepare(client)
            per_process = [(kind, (p + 1) * USERS_PER_PROCESS, args.seconds) for p in range(args.processes)]
            rates[kind].append(sum(run_together(_caller, per_process, timeout=args.seconds + 60)))
    ping = statistics.median(rates["PING"])
    print(f"{'calls':<18}{'per second':>12}{'vs PING':>10}")
    for kind in kinds:
        rate = statistics.median(rates[kind])
        print(f"{kind:<18}{rate:>12,.0f}{rate / ping:>9.2f}x")
    _prepare(client)  # leave the streams empty rather than millions of entries long
    return 0


if __name__ == "__main__":
    sys.exit(main())
