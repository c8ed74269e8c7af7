"""What a Redis in cluster mode costs one RESERVE, against one that is not: the script's time
per call (``INFO commandstats``, ``usec_per_call``) and the server's CPU per call (``INFO
cpu``, user + sys, which adds reading the request, writing the answer and the server's own
timers), on servers started here, each of its own.

    .venv/bin/python -m benchmarks.reserve_cpu_modes [--calls 20000] [--rounds 5] [--keys 1000000] \\
        [--processes 4] [--states 16]

Nine runs, alternated over the rounds, each ``--calls`` RESERVEs of a voucher (one round trip
each, a new user each, stock that never runs out; ``benchmarks.reserve_cpu``'s voucher):

- ``plain``: a ``redis-server`` without cluster mode;
- ``cluster``: one with ``--cluster-enabled yes``, a cluster of one node owning every slot,
  so that it does a cluster node's work per key (the slot of each key checked against the
  node's slots, each key kept in its slot's index) with no other node to forward to;
- ``plain, N keys`` and ``cluster, N keys``: the same with ``--keys`` other keys in the
  keyspace (``DEBUG POPULATE``), spread over every slot;
- ``cluster, cluster client``: the cluster node through ``RedisCluster`` rather than
  ``redis.Redis`` (what the client sends may differ; the server times only what it gets);
- ``plain, N processes`` and ``cluster, N processes``: the same calls made by ``--processes``
  client processes at once, so that the server finds several requests ready at each turn
  of its event loop, as a busy master does, rather than one;
- ``plain, N states`` and ``cluster, N states``: one client's calls spread over ``--states``
  vouchers, each a state of its own (its hash and its stream), user by user, as a master
  holding that many of an item's bucket states serves them.

Printed: medians of the rounds, and each round's figure. The client's own work never shows in
these figures: they are the server's.
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

from .reserve_cpu import VOUCHER_GROUP, groups_load

USERS_PER_ROUND = 1_000_000
OTHER_STATES = 1000  # the further vouchers' group ids start past the voucher's by this


def _modes(keys: int, processes: int, states: int) -> tuple[str, ...]:
    return (
        "plain",
        "cluster",
        f"plain, {keys:,} keys",
        f"cluster, {keys:,} keys",
        "cluster, cluster client",
        f"plain, {processes} processes",
        f"cluster, {processes} processes",
        f"plain, {states} states",
        f"cluster, {states} states",
    )


def _server(cluster: bool, keys: int):
    """A redis-server of this benchmark's own, in cluster mode (one node owning every slot)
    or not, with ``keys`` keys besides the benchmark's."""
    from locking.testing import RedisServer, free_cluster_port

    options = ["--enable-debug-command", "yes"]
    if cluster:
        options += ["--cluster-enabled", "yes"]
    server = RedisServer(free_cluster_port() if cluster else None, *options).start()
    with redis.Redis(port=server.port) as client:
        if cluster:
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
            give_up = time.monotonic() + 30
            while b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                if time.monotonic() > give_up:
                    raise RuntimeError("the one-node cluster did not come up")
                time.sleep(0.05)
        if keys:
            client.execute_command("DEBUG", "POPULATE", keys, "filler", 16)
    return server


def _server_cpu(client: redis.Redis) -> float:
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def _groups_load(client, states: int) -> list[int]:
    """``benchmarks.reserve_cpu``'s vouchers, and ``states`` - 1 more like its voucher: the
    groups to reserve from."""
    from django.utils import timezone

    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.values import GroupKeys, Rules

    groups_load(client)
    reservations = Reservations(client)
    more = [VOUCHER_GROUP + OTHER_STATES + n for n in range(1, states)]
    now = timezone.now()
    rules = Rules(begin_at=now - timedelta(minutes=1), end_at=now + timedelta(hours=1), limit=1)
    for group in more:
        client.delete(*GroupKeys.of(group).all())
        reservations.load(group_id=group, rules=rules, stock={1: 10**12})
    return [VOUCHER_GROUP, *more]


def _reserve_many(reservations, first_user: int, calls: int, groups: list[int]) -> None:
    rand = random.Random(first_user).random
    for user in range(first_user, first_user + calls):
        answer = reservations.reserve(group_id=groups[user % len(groups)], user_id=user, rand=rand())
        assert answer.refusal is None, answer


def _caller(port: int, first_user: int, calls: int, groups: list[int], start, results) -> None:
    from inventory.redis_lua.client import Reservations

    reservations = Reservations(redis.Redis(port=port))
    reservations.reserve(group_id=VOUCHER_GROUP, user_id=first_user - 1, rand=0.5)  # connected
    start.wait()
    _reserve_many(reservations, first_user, calls, groups)
    results.put(calls)


def measure(
    client, server: redis.Redis, calls: int, first_user: int, processes: int = 1, states: int = 1
) -> tuple[float, float]:
    """``calls`` RESERVEs on ``server`` over ``states`` vouchers, through ``client`` or, given
    ``processes`` over 1, that many processes of their own at once: the script's us per call (Redis' own timing of
    the command) and the server's CPU us per call."""
    from inventory.redis_lua.client import Reservations

    from .processes import run_together

    reservations = Reservations(client)
    groups = _groups_load(client, states)
    reservations.reserve(group_id=VOUCHER_GROUP, user_id=first_user - 1, rand=0.5)  # loaded, connected
    server.config_resetstat()
    cpu_before = _server_cpu(server)
    if processes > 1:
        share = calls // processes
        port = server.connection_pool.connection_kwargs["port"]
        per_process = [(port, first_user + n * (share + 1) + 1, share, groups) for n in range(processes)]
        calls = sum(run_together(_caller, per_process, timeout=600))
    else:
        _reserve_many(reservations, first_user, calls, groups)
    cpu_used = _server_cpu(server) - cpu_before
    stats = server.info("commandstats")
    script = next(stats[name] for name in ("cmdstat_fcall", "cmdstat_evalsha") if name in stats)
    return float(script["usec_per_call"]), cpu_used / calls * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--states", type=int, default=16)
    args = parser.parse_args(argv)

    setup_django_without_database()
    from redis.cluster import RedisCluster

    modes = _modes(args.keys, args.processes, args.states)
    servers = {
        modes[0]: _server(False, 0),
        modes[1]: _server(True, 0),
        modes[2]: _server(False, args.keys),
        modes[3]: _server(True, args.keys),
    }
    servers[modes[4]] = servers[modes[6]] = servers[modes[1]]
    servers[modes[5]] = servers[modes[7]] = servers[modes[0]]
    servers[modes[8]] = servers[modes[1]]
    processes = {modes[5]: args.processes, modes[6]: args.processes}
    states = {modes[7]: args.states, modes[8]: args.states}
    stats = {mode: redis.Redis(port=server.port) for mode, server in servers.items()}
    clients = dict(stats)
    clients[modes[4]] = RedisCluster(host="127.0.0.1", port=servers[modes[4]].port)
    try:
        print(f"machine: {describe(stats[modes[0]])}")
        print(f"{args.calls:,} calls x {args.rounds} rounds per run, one round trip each, servers of their own")
        print("load average before: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        figures: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
        for round_number in range(args.rounds):
            order = modes if round_number % 2 == 0 else tuple(reversed(modes))
            for n, mode in enumerate(order):
                first_user = (round_number * len(modes) + n + 1) * USERS_PER_ROUND
                shape = {"processes": processes.get(mode, 1), "states": states.get(mode, 1)}
                figures[mode].append(measure(clients[mode], stats[mode], args.calls, first_user, **shape))
        print(f"{'run':<28}{'script us/call':>16}{'server CPU us/call':>20}  rounds (script; CPU)")
        for mode, rows in figures.items():
            script = statistics.median(row[0] for row in rows)
            cpu = statistics.median(row[1] for row in rows)
            each = ", ".join(f"{row[0]:.1f}; {row[1]:.1f}" for row in rows)
            print(f"{mode:<28}{script:>16.2f}{cpu:>20.2f}  {each}")
        print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    finally:
        for client in {id(c): c for c in [*stats.values(), *clients.values()]}.values():
            client.close()
        for server in {id(s): s for s in servers.values()}.values():
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
