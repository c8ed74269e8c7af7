"""Reservations per second of one bucketed redis_lua voucher against one unbucketed, on one
Redis and on a Redis Cluster of 3 masters, in one run.

    .venv/bin/python -m benchmarks.reservations_buckets [--processes 4] [--seconds 3] [--rounds 3] [--buckets 8]

Four runs, alternated over the rounds:

- ``one state, one Redis``: RESERVE of a voucher of one row (today's layout);
- ``8 states, one Redis``: the voucher split into ``--buckets`` states
  (``inventory.redis_lua.bucket_states.reserve_at_home``: RESERVE at the user's home state);
- the same two on a 3-master cluster started here (``locking.testing.start_cluster``),
  where the bucketed voucher's states hash to slots on every master: how many fell on each
  is printed beside the masters' CPU (``inventory.redis_lua.slots`` spreads them as evenly
  as 3 masters allow, so that ``--buckets 9`` puts 3 on each, where 8 put 3, 3 and 2).

Then a sell-out on the 8 states, one Redis and 3 masters: ``--sellout-units`` units in the
even buckets only (the odd ones start empty, so their buyers borrow), three buyers a unit.
Printed: units sold, buyers told sold out, units left once the buyers stopped (a unit left
while a buyer was told sold out is one stranded: target 0) and the slowest take.

In the throughput runs every call reserves (distinct users, stock that never runs out: no
borrowing, which the rebalancer keeps rare), so each also appends its pending entry to a stream. Printed: calls
per second (median of the rounds), the client processes' CPU per call and each master's
Redis CPU per call (``INFO cpu``, user + sys), which together say what limits the run: the
clients' cores, or one master's core.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import time
from datetime import timedelta

import redis

from harness.django_setup import setup_django_without_database
from harness.machine import describe

from .processes import run_together

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")
GROUP = 9_000_001  # below 2**25: a bucketed group's states need it
USERS_PER_PROCESS = 10_000_000


def _client(where: list[int] | None):
    from redis.cluster import ClusterNode, RedisCluster

    if where is None:
        return redis.Redis.from_url(REDIS_URL)
    return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", port) for port in where])


def _prepare(client, states: list[int]) -> None:
    from django.utils import timezone

    from inventory.redis_lua.bucket_states import states_load
    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.values import GroupKeys, Rules

    now = timezone.now()
    rules = Rules(begin_at=now - timedelta(minutes=1), end_at=now + timedelta(hours=1), limit=1)
    for state in states:
        client.delete(*GroupKeys.of(state).all())
    stock = [{1000 + bucket: 10**12} for bucket in range(len(states))]
    states_load(Reservations(client), states, rules=rules, stock=stock)


def _caller(states: list[int], where, first_user: int, seconds: float, start, results) -> None:
    from inventory.redis_lua.bucket_states import reserve_at_home
    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.transfers import Transfers

    client = _client(where)
    reservations, transfers = Reservations(client), Transfers(client)
    rand = random.Random(first_user).random
    user = first_user
    start.wait()
    used = resource.getrusage(resource.RUSAGE_SELF)
    calls, stop = 0, time.perf_counter() + seconds
    while time.perf_counter() < stop:
        if len(states) == 1:
            answer = reservations.reserve(group_id=states[0], user_id=user, rand=rand())
        else:
            answer = reserve_at_home(reservations, transfers, states, user_id=user, rand=rand())
        assert answer.refusal is None, answer
        user += 1
        calls += 1
    after = resource.getrusage(resource.RUSAGE_SELF)
    results.put((calls / seconds, after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime, calls))


def _sellout_buyer(states: list[int], where, first_user: int, buyers: int, start, results) -> None:
    from inventory.redis_lua.bucket_states import reserve_at_home
    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.transfers import Transfers

    client = _client(where)
    reservations, transfers = Reservations(client), Transfers(client)
    rand = random.Random(first_user).random
    start.wait()
    sold, refused, slowest = 0, 0, 0.0
    for user in range(first_user, first_user + buyers):
        began = time.perf_counter()
        answer = reserve_at_home(reservations, transfers, states, user_id=user, rand=rand())
        slowest = max(slowest, time.perf_counter() - began)
        sold += answer.refusal is None
        refused += answer.refusal == "sold_out"
    results.put((sold, refused, slowest))


def _sellout(states: list[int], where, *, processes: int, units: int) -> tuple[int, int, int, float]:
    """``units`` spread over the even buckets only (the odd ones start empty, so half the
    buyers borrow), three buyers per unit: sold, told sold out, units left after, and the
    slowest take (ms)."""
    from django.utils import timezone

    from inventory.redis_lua.bucket_states import states_load
    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.transfers import Transfers
    from inventory.redis_lua.values import GroupKeys, Rules

    client = _client(where)
    _prepare(client, states)
    for state in states:
        client.delete(*GroupKeys.of(state).all())
    evens = (len(states) + 1) // 2  # buckets 0, 2, 4...: an odd count has one more than half
    share = units // evens
    stock = [{1000 + bucket: share if bucket % 2 == 0 else 0} for bucket in range(len(states))]
    now = timezone.now()
    rules = Rules(begin_at=now - timedelta(minutes=1), end_at=now + timedelta(hours=1), limit=1)
    states_load(Reservations(client), states, rules=rules, stock=stock)
    buyers = 3 * share * evens // processes
    per_process = [(states, where, (p + 1) * USERS_PER_PROCESS, buyers) for p in range(processes)]
    outcomes = run_together(_sellout_buyer, per_process, timeout=600)
    left = sum(one.left or 0 for one in Transfers(client).units(states))
    _prepare(client, states)
    client.close()
    sold, refused = sum(one[0] for one in outcomes), sum(one[1] for one in outcomes)
    return sold, refused, left, max(one[2] for one in outcomes) * 1000


def _states_per_master(states: list[int], ports: list[int]) -> list[int]:
    """How many of ``states`` each master (in the order of ``ports``) serves, by the slots the
    cluster itself says each serves."""
    from redis.crc import key_slot

    from inventory.redis_lua.values import GroupKeys
    from locking.testing import cluster_nodes

    with redis.Redis(port=ports[0]) as client:
        served = {node["port"]: node["slots"] for node in cluster_nodes(client)}
    slots = [key_slot(GroupKeys.of(state).state.encode()) for state in states]
    return [sum(slot in served[port] for slot in slots) for port in ports]


def _redis_cpu(ports: list[int] | None) -> list[float]:
    clients = [redis.Redis.from_url(REDIS_URL)] if ports is None else [redis.Redis(port=p) for p in ports]
    return [float(c.info("cpu")["used_cpu_user"]) + float(c.info("cpu")["used_cpu_sys"]) for c in clients]


def _run(states: list[int], where: list[int] | None, *, processes: int, seconds: float) -> tuple:
    """One run: calls per second, client CPU per call (us), each master's Redis CPU per call."""
    client = _client(where)
    _prepare(client, states)
    before = _redis_cpu(where)
    per_process = [(states, where, (p + 1) * USERS_PER_PROCESS, seconds) for p in range(processes)]
    outcomes = run_together(_caller, per_process, timeout=seconds + 60)
    redis_used = [b - a for a, b in zip(before, _redis_cpu(where), strict=True)]
    calls = sum(one[2] for one in outcomes)
    client_us = sum(one[1] for one in outcomes) / calls * 1e6
    _prepare(client, states)  # leave the streams empty
    client.close()
    return sum(one[0] for one in outcomes), client_us, [used / calls * 1e6 for used in redis_used]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--sellout-units", type=int, default=2000)
    args = parser.parse_args(argv)

    setup_django_without_database()
    from inventory.redis_lua.bucket_states import item_states
    from locking.testing import start_cluster

    print(f"machine: {describe(redis.Redis.from_url(REDIS_URL))}")
    servers = start_cluster(3)
    ports = [server.port for server in servers]
    try:
        print(f"{args.processes} processes x {args.seconds:g} s, {args.rounds} rounds; one Redis at {REDIS_URL}, ")
        print(f"a cluster of 3 masters at ports {ports}")
        runs = {
            "one state, one Redis": (item_states(GROUP, 1), None),
            f"{args.buckets} states, one Redis": (item_states(GROUP, args.buckets), None),
            "one state, 3 masters": (item_states(GROUP, 1), ports),
            f"{args.buckets} states, 3 masters": (item_states(GROUP, args.buckets), ports),
        }
        figures: dict[str, list[tuple]] = {name: [] for name in runs}
        for round_number in range(args.rounds):
            for name in runs if round_number % 2 == 0 else reversed(list(runs)):
                figures[name].append(_run(*runs[name], processes=args.processes, seconds=args.seconds))
        print(f"{'run':<24}{'calls/s':>10}{'client us/call':>16}  Redis us/call per master")
        for name, rows in figures.items():
            rate = statistics.median(row[0] for row in rows)
            client_us = statistics.median(row[1] for row in rows)
            per_master = [statistics.median(row[2][n] for row in rows) for n in range(len(rows[0][2]))]
            masters = " ".join(f"{us:5.1f}" for us in per_master)
            print(f"{name:<24}{rate:>10,.0f}{client_us:>16.1f}  {masters}")
        spread = _states_per_master(item_states(GROUP, args.buckets), ports)
        print(f"{args.buckets} states per master, in the order above: {', '.join(map(str, spread))}")
        print(f"\nSell-out: {args.sellout_units} units in the even buckets of {args.buckets}, three buyers a unit")
        print(f"{'run':<24}{'sold':>8}{'sold out':>10}{'left':>6}{'slowest ms':>12}")
        for name in (f"{args.buckets} states, one Redis", f"{args.buckets} states, 3 masters"):
            sold, refused, left, slowest = _sellout(*runs[name], processes=args.processes, units=args.sellout_units)
            print(f"{name:<24}{sold:>8}{refused:>10}{left:>6}{slowest:>12.1f}")
    finally:
        for server in servers:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
