"""What WAIT costs a reservation: the redis_lua script on a Redis Cluster of three masters
with a replica each, answered as soon as the master has it (WAIT off) against answered once
the replica has it too (``RESERVATIONS_WAIT_REPLICAS=1``: ``WAIT 1`` right after the script,
on its connection), from several processes, in one run.

    .venv/bin/python -m benchmarks.replicas [--processes 4] [--seconds 3] [--rounds 3] [--wait-ms 100]

Each process reserves a voucher's units for new users, one call after the other, on one of
three vouchers, one on each master; the two settings alternate over the rounds, so that
drift in the machine's speed hits both alike. Printed: reservations per second (the median
of the rounds) and the latency of one call (its 50th, 95th and 99th percentile over every
call of every round), and how many calls the replica did not confirm in time. No database
and no Django request: the client's call alone (``inventory.redis_lua.client.Reservations``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import timedelta

from harness.django_setup import setup_django_without_database
from harness.machine import describe

from .processes import run_together

USERS_PER_PROCESS = 10_000_000


def _groups(client) -> list[int]:
    """A group id served by each master."""
    from inventory.redis_lua.values import GroupKeys

    by_master: dict[str, int] = {}
    group = 900_000_000
    while len(by_master) < 3:
        group += 1
        by_master.setdefault(client.get_node_from_key(GroupKeys.of(group).state).name, group)
    return sorted(by_master.values())


def _prepare(client, groups: list[int]) -> None:
    from django.utils import timezone

    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.values import GroupKeys, Rules

    reservations = Reservations(client)
    now = timezone.now()
    for group in groups:
        client.delete(*GroupKeys.of(group).all())
        rules = Rules(begin_at=now - timedelta(minutes=1), end_at=now + timedelta(hours=1), limit=1)
        reservations.load(group_id=group, rules=rules, stock={1: 10**12})


def _caller(urls: list[str], group: int, wait: tuple[int, int], first_user: int, seconds: float, start, results):
    from core.redis_cluster import cluster_redis
    from inventory.redis_lua.client import Reservations

    reservations = Reservations(cluster_redis(urls), wait_replicas=wait[0], wait_ms=wait[1])
    rand = random.Random(first_user).random
    user, took, unconfirmed = first_user, [], 0
    start.wait()
    stop = time.perf_counter() + seconds
    while (began := time.perf_counter()) < stop:
        answer = reservations.reserve(group_id=group, user_id=user, rand=rand())
        took.append(time.perf_counter() - began)
        assert answer.refusal is None, answer
        unconfirmed += answer.unconfirmed
        user += 1
    results.put((len(took) / seconds, took, unconfirmed))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wait-ms", type=int, default=100, help="RESERVATIONS_WAIT_MS: how long WAIT waits")
    args = parser.parse_args(argv)

    setup_django_without_database()
    import redis

    from core.redis_cluster import cluster_redis
    from locking.testing import start_cluster

    nodes = start_cluster(3, replicas=1)
    try:
        urls = [node.url for node in nodes]
        client = cluster_redis(urls)
        groups = _groups(client)
        with redis.Redis(port=nodes[0].port) as one:
            print(f"machine: {describe(one)}")
        print(f"a Redis Cluster of 3 masters with a replica each on 127.0.0.1; {args.processes} processes x")
        print(f"{args.seconds:g} s, {args.rounds} rounds, each process on one of 3 vouchers (one per master)")
        settings = {"WAIT off": (0, 0), f"WAIT 1 {args.wait_ms}": (1, args.wait_ms)}
        rates: dict[str, list[float]] = {name: [] for name in settings}
        took: dict[str, list[float]] = {name: [] for name in settings}
        unconfirmed = dict.fromkeys(settings, 0)
        for round_number in range(args.rounds):
            for name in settings if round_number % 2 == 0 else reversed(settings):
                _prepare(client, groups)
                per_process = [
                    (urls, groups[p % 3], settings[name], (p + 1) * USERS_PER_PROCESS, args.seconds)
                    for p in range(args.processes)
                ]
                done = run_together(_caller, per_process, timeout=args.seconds + 60)
                rates[name].append(sum(rate for rate, _, _ in done))
                took[name] += [seconds for _, calls, _ in done for seconds in calls]
                unconfirmed[name] += sum(count for _, _, count in done)
        print(f"{'reservations':<16}{'per second':>12}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'unconfirmed':>13}")
        for name in settings:
            cuts = statistics.quantiles(took[name], n=100)
            print(
                f"{name:<16}{statistics.median(rates[name]):>12,.0f}{cuts[49] * 1000:>9.2f}"
                f"{cuts[94] * 1000:>9.2f}{cuts[98] * 1000:>9.2f}{unconfirmed[name]:>13}"
            )
    finally:
        for node in nodes:
            node.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
