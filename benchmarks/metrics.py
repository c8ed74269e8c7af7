"""What the Prometheus metrics and the rate limits cost: the load tests' crowd (and GET
/api/ping, the cheapest path, where a fixed cost per request weighs most) against two
servers side by side, one with ``METRICS_ENABLED`` and ``RATE_LIMITS_ENABLED`` on and one
with both off, in one run (``--switch metrics`` or ``limits`` for one of them; ``--switch
none`` runs two servers alike, both off, to show the comparison's own floor: which of two
identical servers the machine favours, and by how much).

With the limits on, every purchase and draw is counted against its buyer's and its
address's limits in Redis, as in production, but the address's limit is raised out of
reach (``RATE_LIMIT_PER_ADDRESS_PER_SECOND``): the crowd comes from this one address, and
what is measured is the counting, not refusals.

    .venv/bin/python -m benchmarks.metrics [--switch both|metrics|limits|none] [--seconds 4] [--rounds 3]
        [--concurrency 50] [--server-processes 4] [--crowd-stock 500] [--tokens 20000]
        [--database-url mysql://root:@127.0.0.1:3306/flashsale_bench]
        [--redis-url redis://127.0.0.1:6379/5] [--broker-url redis://127.0.0.1:6379/6]

Both servers are started as ``benchmarks.http`` starts its one (gunicorn with
config/gunicorn.py, ``--server-processes`` sync workers, its own Redlock servers and
multiprocess directory), on the same database and Redis, and every run loads both at once,
``--concurrency`` requests in flight each, so that whatever else the machine does weighs on
both alike. Each run buys a fresh voucher with buyers who
try once each (``--concurrency`` at a time, ``--crowd-stock`` units: most hear
``sold_out``), under ``db_atomic`` and ``redis_lua``. Figures are medians: requests per
second and the server's CPU per request served (gunicorn's master and workers, from
``/proc``), and the cost of the metrics as the median over the rounds of each pair's
difference (the two runs of a pair are the same seconds). The target, printed beside the
figures (nothing is asserted, as in the other benchmarks): under 10%. Last, what
the metrics add to a purchase measured in one process (multiprocess mode, as in a
worker), free of the machine's noise, against ping's CPU per request.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from harness.django_setup import setup_django, setup_django_without_database

from .client import get_requests, load, post_requests
from .cpu import CpuMeter, Run
from .http import server_running
from .persisting import broker_purge
from .report import median, say
from .seeding import Items, buyer_tokens

TARGET = 0.10
# The environment each switch sets on the "on" server ("0" for each on the "off" one).
SWITCHES = {
    "metrics": ("METRICS_ENABLED",),
    "limits": ("RATE_LIMITS_ENABLED",),
    "both": ("METRICS_ENABLED", "RATE_LIMITS_ENABLED"),
    # Both servers alike, both off: what the comparison shows then is the method's own bias
    # and noise (which server the machine favours), the floor under the other figures.
    "none": (),
}
PATHS = ["GET /api/ping", "crowd, db_atomic", "crowd, redis_lua"]
SIDES = ["on", "off"]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4, help="seconds of load per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight")
    parser.add_argument("--crowd-stock", type=int, default=500, help="the crowd's units")
    parser.add_argument("--server-processes", type=int, default=4, help="gunicorn worker processes per server")
    parser.add_argument("--race-window-ms", type=int, default=0, help="RACE_WINDOW_MS of the servers")
    parser.add_argument("--tokens", type=int, default=20_000, help="distinct buyers")
    parser.add_argument(
        "--database-url", default=os.environ.get("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_bench")
    )
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_HTTP_REDIS_URL", "redis://127.0.0.1:6379/5"))
    parser.add_argument("--broker-url", default=os.environ.get("BENCH_HTTP_BROKER_URL", "redis://127.0.0.1:6379/6"))
    parser.add_argument("--switch", choices=sorted(SWITCHES), default="both", help="what the two servers differ in")
    parser.add_argument("--hot-path", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def hot_path() -> dict[str, float]:
    """CPU microseconds per call of what a purchase adds, in a process in multiprocess mode
    as a gunicorn worker is: the middleware counting and timing the response (the request
    itself answered at once), and the outcome counted."""
    from django.http import HttpResponse
    from django.test import RequestFactory
    from django.urls import resolve

    from core.metrics import RequestMetricsMiddleware, purchase_counted

    request = RequestFactory().post("/api/vouchers/1/purchase")
    request.resolver_match = resolve("/api/vouchers/1/purchase")
    response = HttpResponse(status=201)
    middleware = RequestMetricsMiddleware(lambda request: response)

    class Order:
        status = "confirmed"

    order, calls = Order(), 50_000

    def per_call(step) -> float:
        for _ in range(1_000):
            step()
        started = time.process_time()
        for _ in range(calls):
            step()
        return 1e6 * (time.process_time() - started) / calls

    def outcome():
        with purchase_counted("db_atomic") as counted:
            counted(order)

    return {"request": per_call(lambda: middleware(request)), "outcome": per_call(outcome)}


def hot_path_measured(args) -> dict[str, float]:
    """``hot_path`` in a process of its own, whose multiprocess directory is set before
    prometheus_client is imported (this one imported it in memory mode)."""
    with tempfile.TemporaryDirectory(prefix="bench-metrics-hot-") as directory:
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": directory, "DATABASE_URL": args.database_url}
        answer = subprocess.run(
            [sys.executable, "-m", "benchmarks.metrics", "--hot-path"],
            cwd=Path(__file__).resolve().parent.parent,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(answer.stdout)


def requests_for(path: str, port: int, items: Items, tokens: list[str], args):
    if path == "GET /api/ping":
        return get_requests("/api/ping", port)
    voucher_id, _ = items.voucher(path.split(", ")[1], args.crowd_stock)
    return post_requests(f"/api/vouchers/{voucher_id}/purchase", port, tokens)


def both_run(path: str, servers, meters, items: Items, tokens: list[str], args, seconds: float) -> dict[str, Run]:
    """``path`` on both servers at once, ``--concurrency`` each: whatever else the machine
    does meanwhile weighs on both alike, which runs one after the other never got (on a
    shared machine their CPU per request moved by a third from one run to the next)."""
    requests = {side: requests_for(path, servers[side].port, items, tokens, args) for side in SIDES}
    before = {side: meters[side].sample() for side in SIDES}
    with ThreadPoolExecutor(len(SIDES)) as pool:
        tallies = dict(
            zip(
                SIDES,
                pool.map(lambda side: load(servers[side].port, requests[side], args.concurrency, seconds), SIDES),
                strict=True,
            )
        )
    return {side: Run(tallies[side], before[side], meters[side].sample()) for side in SIDES}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.hot_path:
        setup_django_without_database()
        print(json.dumps(hot_path()))
        return 0
    setup_django(args)
    import redis

    from harness.machine import describe

    tokens = buyer_tokens(args)
    redis_client = redis.Redis.from_url(args.redis_url)
    switched = SWITCHES[args.switch]
    if switched:
        print(f"# What {' and '.join(switched)} cost: on and off, side by side\n")
    else:
        print("# The method's floor: two servers alike (metrics and limits off on both), side by side\n")
    print(f"machine: {describe(redis_client)}")
    print(
        f"servers: two gunicorns, {args.server_processes} sync workers each, "
        f"{'/'.join(switched) + ' =1 and =0' if switched else 'alike'}; "
        f"client: epoll, {args.concurrency} in flight to each server, both loaded at once; "
        f"{args.seconds:g} s per run, {args.rounds} rounds\n"
    )
    items = Items()
    runs: dict[tuple[str, str], list[Run]] = {(path, side): [] for path in PATHS for side in SIDES}
    try:
        with ExitStack() as stack:

            def switches(side: str) -> dict[str, str]:
                return dict.fromkeys(SWITCHES["both"], "0") | dict.fromkeys(switched, "1" if side == "on" else "0")

            servers = {
                side: stack.enter_context(
                    server_running(
                        args,
                        **switches(side),
                        RATE_LIMIT_PER_ADDRESS_PER_SECOND="1000000000",
                    )
                )
                for side in SIDES
            }
            meters = {side: CpuMeter(server.pid, redis_client) for side, server in servers.items()}

            def run(path: str, seconds: float) -> dict[str, Run]:
                return both_run(path, servers, meters, items, tokens, args, seconds)

            say("warming up both servers ...")
            for path in PATHS:
                run(path, 0.5)
            for number in range(args.rounds):
                for path in PATHS:
                    say(f"round {number + 1}: {path}, on both servers at once ...")
                    for side, one in run(path, args.seconds).items():
                        runs[(path, side)].append(one)
    finally:
        items.drop()
        broker_purge(args.broker_url)

    print(
        f"{'':<20}{'req/s on':>10}{'off':>7}{'lost':>7}{'CPU ms/req on':>15}{'off':>7}{'added':>7}  "
        "CPU added, each round  verdict"
    )
    worst = 0.0
    for path in PATHS:
        on, off = runs[(path, "on")], runs[(path, "off")]
        # Each round ran the two at once: their ratio cancels the machine's drift, which
        # the medians of each side alone keep.
        lost = statistics.median(1 - a.tally.rate / b.tally.rate for a, b in zip(on, off, strict=True) if b.tally.rate)
        added_each = [a.ms_per_request("server") / b.ms_per_request("server") - 1 for a, b in zip(on, off, strict=True)]
        added = statistics.median(added_each)
        worst = max(worst, lost, added)
        verdict = "ok" if max(lost, added) < TARGET else f"over {TARGET:.0%}"
        rate_on, rate_off = (median(side, lambda r: r.tally.rate) for side in (on, off))
        cpu_on, cpu_off = (median(side, lambda r: r.ms_per_request("server")) for side in (on, off))
        each = " ".join(f"{one:+.0%}" for one in added_each)
        print(
            f"{path:<20}{rate_on:>10,.0f}{rate_off:>7,.0f}{lost:>+7.1%}{cpu_on:>15.3f}{cpu_off:>7.3f}{added:>+7.1%}  "
            f"{each:<22} {verdict}"
        )
    print(f"\nworst of the throughput lost and the CPU added (medians of the rounds' pairs): {worst:.1%}")
    # The figures above carry the noise of a shared machine; this one does not.
    hot = hot_path_measured(args)
    ping = median(runs[("GET /api/ping", "off")], lambda r: r.ms_per_request("server"))
    added = (hot["request"] + hot["outcome"]) / 1000
    print(
        f"in one process, per purchase: {hot['request']:.1f} us to count and time the request, "
        f"{hot['outcome']:.1f} us to count its outcome: {added / ping:.1%} of ping's {ping:.3f} ms of server CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
