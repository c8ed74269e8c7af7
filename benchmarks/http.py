"""The redis_lua strategy over HTTP: what a purchase and a draw cost against a no-op JSON
endpoint of the same server, the crowd against db_atomic, the server's CPU per request, and
how a Celery worker keeps up persisting the reservations; one server, one run.

    .venv/bin/python -m benchmarks.http [--seconds 4] [--rounds 2] [--concurrency 50]
        [--server-processes 4] [--persist-seconds 15] [--tokens 100000] [--no-persist]
        [--database-url mysql://root:@127.0.0.1:3306/flashsale_bench]
        [--redis-url redis://127.0.0.1:6379/5] [--broker-url redis://127.0.0.1:6379/6]

(defaults from ``DATABASE_URL``, ``BENCH_HTTP_REDIS_URL`` and ``BENCH_HTTP_BROKER_URL``). The
server is started as the load tests start theirs (``harness.server``): gunicorn,
``--server-processes`` sync workers on 127.0.0.1, its Redlock servers, MariaDB and Redis on
127.0.0.1, and ``RACE_WINDOW_MS=0`` (no pause between check and write: throughput, not the
race, is measured). Its Celery broker is a Redis database of its own, so that the worker of
part 4 hears only this server. Buyers are bearer tokens from ``manage.py issue_tokens``, kept
in ``var/bench/`` and issued again only when the database no longer knows them.

1. Request path: ``GET /api/ping`` (the baseline), ``POST /api/vouchers/{id}/purchase`` and
   ``POST /api/pools/{id}/draw`` under ``redis_lua``, every request by a new buyer on stock
   that never runs out, so every answer is 202; requests per second, each against ping's.
2. Crowd: the load tests' ``crowd`` scenario (``loadtests/scenarios.py``: buyers who try once
   each, ``--concurrency`` at a time, on ``--crowd-stock`` units, so most hear ``sold_out``)
   under ``redis_lua`` and ``db_atomic``: requests per second, their ratio, and when the last
   unit was sold.
3. CPU per request served, for every run above: user + system CPU of gunicorn's master and
   workers (``/proc/<pid>/stat``). Beside it, to read with care: this process's (the client),
   MariaDB's and Redis' (both count whatever else uses them) and how busy the machine was.
4. Persisting, with a real Celery worker (concurrency 1, started as
   ``tests/test_reservations_worker.py`` starts one): first the reservations that parts 1 and
   2 left waiting (the beat's sweeps ask for their drains), timed until none waits; then a
   ``redis_lua`` crowd of ``--persist-seconds`` on stock that never runs out, the rows the
   worker wrote meanwhile, and the seconds from the load's end until every reservation is a
   row (``Reservations.waiting`` is 0 for the voucher), with the worker's rows per second
   and CPU per row.

Parts 1 to 3 run without a worker, so that its CPU does not take from the server being
measured. Runs alternate over the rounds so that drift in the machine's speed hits all alike;
figures are medians. Nothing is asserted: the targets are printed beside the ratios.

The load generator is a small epoll client in this process (``load``), not Locust. The load
tests run Locust as a command of its own (``loadtests/locust_process.py``), not as a library, and
its gevent users, hooks and statistics cost CPU on the same two cores as the server: against
``GET /api/ping`` here, Locust's ``FastHttpUser`` (50 users, one process) spent about 0.4 ms
of CPU per request and reached half the requests per second that this client reaches at
0.08 ms, and an asyncio client (streams or protocols) spent 0.13 to 0.15 ms. Each request is
a prebuilt byte string sent on a fresh connection, its answer read until the server closes
(gunicorn's sync workers close every connection after one answer, so no client can keep one
alive); the client's own CPU per request is printed with the rest.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.django_setup import setup_django
from harness.machine import describe
from harness.server import running_server

from .client import get_requests, post_requests
from .context import Context
from .cpu import CpuMeter, Run
from .persisting import broker_purge, persistence_run, report_persistence
from .report import median, report_cpu, report_rates, say
from .seeding import AMPLE, Items, buyer_tokens

PING_TARGET = 0.55  # redis_lua purchase and draw, each against ping
CROWD_TARGET = 3.0  # redis_lua against db_atomic in the crowd


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4, help="seconds of load per run of parts 1 and 2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight (the load tests' users)")
    parser.add_argument("--crowd-stock", type=int, default=500, help="the crowd's units (the load tests' --stock)")
    parser.add_argument("--server-processes", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--race-window-ms", type=int, default=0, help="RACE_WINDOW_MS of the server")
    parser.add_argument("--persist-seconds", type=float, default=15, help="seconds of load in part 4")
    parser.add_argument("--no-persist", action="store_true", help="skip part 4 (the Celery worker)")
    parser.add_argument("--tokens", type=int, default=100_000, help="distinct buyers (at most 100,000)")
    # Redis databases nothing else here uses: the tests take 4, 7, 8, 11, 13 and 15 (and flush some),
    # the load tests 10, the other benchmarks 9 and 12. The broker is purged before and after.
    parser.add_argument(
        "--database-url", default=os.environ.get("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_bench")
    )
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_HTTP_REDIS_URL", "redis://127.0.0.1:6379/5"))
    parser.add_argument(
        "--broker-url",
        default=os.environ.get("BENCH_HTTP_BROKER_URL", "redis://127.0.0.1:6379/6"),
        help="the Celery broker of the server and the worker (a Redis database of their own)",
    )
    return parser.parse_args(argv)


def server_running(args, **settings: str):
    """The server as the load tests start theirs (``harness.server.running_server``), its
    Celery broker ``--broker-url`` (theirs is ``REDIS_URL``) and ``settings`` in its
    environment; no Celery worker: part 4 starts its own."""
    return running_server(
        database_url=args.database_url,
        redis_url=args.redis_url,
        processes=args.server_processes,
        race_window_ms=args.race_window_ms,
        broker_url=args.broker_url,
        settings=settings,
    )


PING, PURCHASE, DRAW = "GET /api/ping", "POST purchase, redis_lua", "POST draw, redis_lua"
PATH_RUNS = [PING, PURCHASE, DRAW]
CROWD_STRATEGIES = ["redis_lua", "db_atomic"]


def path_run(name: str, context: Context, seconds: float) -> Run:
    port = context.server.port
    if name == PING:
        requests = get_requests("/api/ping", port)
    elif name == PURCHASE:
        voucher_id, _ = context.items.voucher("redis_lua", AMPLE)
        requests = post_requests(f"/api/vouchers/{voucher_id}/purchase", port, context.tokens)
    else:
        requests = post_requests(f"/api/pools/{context.items.pool('redis_lua')}/draw", port, context.tokens)
    return context.measure(requests, seconds)


def crowd_run(strategy: str, context: Context, seconds: float) -> Run:
    voucher_id, _ = context.items.voucher(strategy, context.args.crowd_stock)
    return context.measure(
        post_requests(f"/api/vouchers/{voucher_id}/purchase", context.server.port, context.tokens), seconds
    )


def rounds(names: list[str], count: int, run) -> dict[str, list[Run]]:
    """Every name run once per round, in turns: forwards, then backwards."""
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for round_number in range(count):
        for name in names if round_number % 2 == 0 else reversed(names):
            say(f"round {round_number + 1}: {name} ...")
            runs[name].append(run(name))
    return runs


def main(argv=None) -> int:
    args = parse_args(argv)
    setup_django(args)
    import redis
    from django.db import connection, connections

    tokens = buyer_tokens(args)
    redis_client = redis.Redis.from_url(args.redis_url)
    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        mariadb = cursor.fetchone()[0]
    connections.close_all()
    load_average = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print("# HTTP: the redis_lua request path, the crowd, CPU per request, persisting\n")
    print(f"machine: {describe(redis_client)}; MariaDB {mariadb}")
    print(
        f"server: gunicorn, {args.server_processes} sync workers on 127.0.0.1, RACE_WINDOW_MS={args.race_window_ms}; "
        f"database {args.database_url.rsplit('/', 1)[-1]}, Redis {args.redis_url}, broker {args.broker_url}"
    )
    print(
        f"client: epoll in this process, {args.concurrency} requests in flight, a connection each; "
        f"{args.seconds:g} s per run, {args.rounds} rounds; load average before: {load_average}\n"
    )
    items = Items()
    try:
        with server_running(args) as server:
            context = Context(args, server, CpuMeter(server.pid, redis_client), items, tokens)
            say("warming up every path ...")
            for name in PATH_RUNS:
                path_run(name, context, 0.5)
            for strategy in CROWD_STRATEGIES:
                crowd_run(strategy, context, 0.5)
            path = rounds(PATH_RUNS, args.rounds, lambda name: path_run(name, context, args.seconds))
            crowd = rounds(CROWD_STRATEGIES, args.rounds, lambda name: crowd_run(name, context, args.seconds))
            persisted = None if args.no_persist else persistence_run(context)
    finally:
        items.drop()
        broker_purge(args.broker_url)

    crowd = {f"crowd, {strategy}": runs for strategy, runs in crowd.items()}
    report_rates("Request path: every buyer new, stock never runs out (ratio to ping)", path, PING, PING_TARGET)
    report_rates(
        f"Crowd: {args.concurrency} at a time, each buyer once, {args.crowd_stock:,} units (ratio to db_atomic)",
        crowd,
        "crowd, db_atomic",
        CROWD_TARGET,
        stock=args.crowd_stock,
    )
    report_cpu({**path, **crowd}, base=PING)
    if persisted is not None:
        alone = median(path[PURCHASE], lambda run: run.ms_per_request("server"))
        report_persistence(args, persisted, alone)
    return 0


if __name__ == "__main__":
    sys.exit(main())
