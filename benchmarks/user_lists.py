"""What a user's list of records costs Redis under ``redis_lua`` while reservations wait to be
written: ``Reservations.of_user``, which every page of the user's orders or draws, and a pool
page's standing (polled every 2 s per open tab), calls for each live item, against
``Reservations.lookup``, the read of one reservation by its id.

    .venv/bin/python -m benchmarks.user_lists [--backlogs 100,10000,100000] [--calls 200]

For each backlog: a voucher's state loaded in Redis alone, as many distinct buyers reserving
a unit each and nothing written yet (a drain behind a crowd), then ``--calls`` reads of one
buyer's list and as many lookups of one reservation. Printed: the median call in ms, and
Redis' own CPU per call (``INFO commandstats``: the HGET, HMGET, XRANGE and HGETALL of a
list, the XRANGE and HGET of a lookup), the time Redis' one thread spends on it while every take waits.
Nothing asserted (docs/design.md, "Reading a reservation").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from functools import partial

import redis

from harness.django_setup import setup_django_without_database
from harness.machine import describe

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")
GROUP = 900_000_021


def redis_usec(client: redis.Redis, commands: tuple[str, ...]) -> float:
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("usec", 0) for name in commands)


def timed(client: redis.Redis, call, calls: int, commands: tuple[str, ...]) -> tuple[float, float]:
    """(median ms per call, Redis' µs per call)."""
    client.config_resetstat()
    took = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took), redis_usec(client, commands) / calls


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlogs", default="100,10000,100000", help="reservations waiting, comma-separated")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)

    setup_django_without_database()
    from django.utils import timezone

    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.values import Rules

    client = redis.Redis.from_url(REDIS_URL)
    reservations = Reservations(client)
    print(f"machine: {describe(client)}")
    print(f"Redis at {REDIS_URL}; {args.calls} calls each, one buyer's list and one reservation's lookup")
    print(f"{'waiting':>8}{'list ms':>10}{'list Redis µs':>15}{'lookup ms':>11}{'lookup Redis µs':>17}")
    for backlog in (int(size) for size in args.backlogs.split(",")):
        reservations.forget(group_id=GROUP)
        now = timezone.now()
        rules = Rules(begin_at=now - timedelta(minutes=1), end_at=now + timedelta(hours=1), limit=1)
        reservations.load(group_id=GROUP, rules=rules, stock={1: backlog})
        ids = []
        for user in range(1, backlog + 1):
            answer = reservations.reserve(group_id=GROUP, user_id=user, rand=0.5, kick_ms=10**9)
            ids.append(answer.reservation_id)
        buyer = backlog // 2 + 1  # in the middle of the stream
        one = ids[buyer - 1]
        listed = timed(client, partial(reservations.of_user, group_id=GROUP, user_id=buyer), args.calls,
                       ("hget", "hmget", "xrange", "hgetall"))  # fmt: skip
        found = timed(client, partial(reservations.lookup, reservation=one), args.calls, ("xrange", "hget"))
        print(f"{backlog:>8,}{listed[0]:>10.3f}{listed[1]:>15.1f}{found[0]:>11.3f}{found[1]:>17.1f}")
    reservations.forget(group_id=GROUP)
    return 0


if __name__ == "__main__":
    sys.exit(main())
