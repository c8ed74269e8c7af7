"""The load-test runner: every strategy under Locust, audited, as a verdict matrix.

    .venv/bin/python -m loadtests.run [--scenario crowd] [--strategies all] [--users 50]
        [--spawn-rate 50] [--duration 15] [--server-processes 4] [--race-window-ms 20]
        [--buckets 1,8]

For each scenario and strategy it creates a fresh voucher or pool, runs Locust
headless against a gunicorn server it started itself (several worker processes),
waits until the server has gone quiet, and audits the database against docs/design.md
("Invariants") and the ids the API confirmed. It also measures a no-op JSON endpoint of
the same server as the baseline.

A lifecycle scenario (``--scenario lifecycle``: items whose units are held for a payment or
a claim, ``--hold-seconds``) runs with a Celery worker and beat too, which release the
holds at their deadline and deliver the payment provider's callbacks, late, twice or lost
and sent again (``loadtests.lifecycle``); its run is audited once every hold and payment
has drained.

For a deferred strategy (``redis_lua``: 202, the records written by a worker) it also
starts a Celery worker and beat on the server's database, Redis and broker
(``--broker-url``), waits after the load until every reservation is persisted (at most
``--drain-timeout`` seconds) before it audits, and compares the item's Redis state with
the database.

Writes ``matrix.csv``, ``matrix.json``, ``matrix.md``, Locust's HTML report per run
and ``report.html`` (charts) under ``--out``. Exits 1 when a safe strategy breaks an
invariant, and when ``none`` or ``local`` (with several server processes) fail to
reproduce the break: the demonstration never loses its point in silence.

The modules: ``scenarios`` (the registry of scenarios), ``products`` (voucher and
pool: fresh data, sampling, audit), ``sampler`` (the stock while Locust runs),
``one_run`` (Locust, then the audit), ``verdict``
(the rules, pure), ``report`` (the outputs); this one holds the command line and runs
the matrix. The server (gunicorn and the Redlock servers) is ``harness.server``'s, which
the benchmarks start too.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path

from django.utils import timezone

from harness.django_setup import setup_django
from harness.machine import describe
from harness.server import ROOT, running_server

from .console import say
from .report import matrix_text, summary, write_outputs
from .scenarios import ADMISSION_RATE, ALL, DEFAULT, HOLD_SECONDS, LIFECYCLE, Scenario, scenarios_help, scenarios_named
from .verdict import Result, bucketed_name


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__,
        epilog=f"scenarios:\n{scenarios_help()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--scenario",
        default=DEFAULT,
        help=f"one of {', '.join(ALL)}, comma-separated names, 'lifecycle' (its {len(LIFECYCLE)}) or 'all'",
    )
    parser.add_argument("--strategies", default="all", help="comma-separated names, or 'all'")
    parser.add_argument(
        "--runs",
        default=None,
        help="scenario:strategy pairs, comma-separated (abandon:none,pay-race:db_atomic,...): exactly those, "
        "in that order, instead of every --strategies for every --scenario",
    )
    parser.add_argument("--users", type=int, default=50, help="Locust users: the concurrency")
    # A crowd that runs out mid-run leaves Locust idle and req/s measures the crowd, not the server.
    parser.add_argument("--buyers", type=int, default=20000, help="distinct buyers (tokens) in the crowd")
    parser.add_argument(
        "--watchers", type=int, default=None, help="open tabs polling the pages in the watched scenario (default 200)"
    )
    parser.add_argument("--spawn-rate", type=float, default=50)
    parser.add_argument("--duration", type=int, default=15, help="seconds of load per run")
    # Large enough that selling, not answering sold-out buyers, fills a good part of the run:
    # the matrix then measures each strategy's guarded write, and the chart shows its pace.
    parser.add_argument("--stock", type=int, default=500, help="the voucher's stock, or the pool's over its prizes")
    parser.add_argument(
        "--buckets",
        type=_bucket_counts,
        default=[1],
        help="the rows a voucher's stock is split into (1 to 64, inventory.buckets), or several comma-separated: "
        "1,8 runs each scenario and strategy on one row and again on 8 buckets, side by side (a pool is drawn "
        "from one)",
    )
    parser.add_argument("--prizes", type=int, default=5, help="prizes of each pool, sharing --stock evenly")
    parser.add_argument("--draws-per-user", type=int, default=3, help="each pool's draw limit per user")
    # With no "no prize" every draw takes a unit: the pool empties within the run and the race shows.
    parser.add_argument("--no-prize-weight", type=int, default=0, help='each pool\'s weight of "no prize"')
    parser.add_argument("--server-processes", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--locust-processes", type=int, default=1, help="Locust worker processes (--processes)")
    parser.add_argument("--race-window-ms", type=int, default=20, help="RACE_WINDOW_MS of the server")
    parser.add_argument("--repeat", type=int, default=1, help="run the whole matrix this many times")
    parser.add_argument(
        "--hammer-buyers", type=int, default=3, help="buyers (or drawing users) sharing the hammers' Locust users"
    )
    parser.add_argument("--baseline-users", type=int, default=20)
    parser.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: var/loadtest/<time>)")
    parser.add_argument(
        "--database-url", default=os.environ.get("LOADTEST_DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_load")
    )
    parser.add_argument("--redis-url", default=os.environ.get("LOADTEST_REDIS_URL", "redis://127.0.0.1:6379/10"))
    parser.add_argument(
        "--broker-url",
        default=os.environ.get("LOADTEST_BROKER_URL"),
        help="Celery broker of the server and the worker (default: --redis-url)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=120,
        help="seconds a deferred strategy's run waits, after the load, for every reservation to be persisted "
        "(and a lifecycle scenario's for every hold and payment to drain)",
    )
    parser.add_argument(
        "--hold-seconds",
        type=int,
        default=HOLD_SECONDS,
        help="the payment or claim window of a lifecycle scenario's items",
    )
    parser.add_argument(
        "--payment-delay-ms",
        type=int,
        default=0,
        help="PAYMENT_PROVIDER_DELAY_MS of a lifecycle run's server: above 0 a pay answers 202, its callback decides",
    )
    parser.add_argument(
        "--admission-rate",
        type=float,
        default=ADMISSION_RATE,
        help="buyers admitted a second by the waiting room of a scenario that has one (surge-queue)",
    )
    parser.add_argument(
        "--stop-when-sold-out",
        action="store_true",
        help="end a run once its stock is gone and nothing more is taken for a second, instead of at --duration "
        "(not a restock's or a lifecycle scenario's)",
    )
    parser.add_argument(
        "--abandon-limit",
        type=int,
        default=None,
        help="the holds one user may abandon of a run's item before their takes are refused (0: no cap); "
        "default: the item's default (docs/design.md, Abandoned holds)",
    )
    parser.add_argument(
        "--abandon-cooldown-seconds",
        type=int,
        default=None,
        help="how long after an abandoned hold the same user's takes of a run's item are refused (0: none); "
        "default: the item's default",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the no-op JSON endpoint's run")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        scenarios = scenarios_named(args.scenario)
    except KeyError as unknown:
        raise SystemExit(f"[loadtest] unknown: {unknown.args[0]}") from None
    setup_django(args)

    # Only now that Django is set up.
    from django.db import connections

    from accounts.services import users_with_tokens_create
    from inventory.strategies import strategy_names

    from .locust_process import LoadRunFailed
    from .staff import staff_token_create

    if args.runs:
        try:
            pairs = [(ALL[scenario], strategy) for scenario, _, strategy in _pairs(args.runs)]
        except KeyError as unknown:
            raise SystemExit(f"[loadtest] unknown: {unknown.args[0]}") from None
    else:
        strategies = strategy_names() if args.strategies == "all" else args.strategies.split(",")
        pairs = [(scenario, strategy) for scenario in scenarios for strategy in strategies]
    unknown = [strategy for _, strategy in pairs if strategy not in strategy_names()]
    if unknown:
        raise SystemExit(f"[loadtest] unknown: {', '.join(dict.fromkeys(unknown))}")
    args.out = args.out or ROOT / "var" / "loadtest" / datetime.now().strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)

    say(f"writing to {args.out}")
    tokens = args.out / "tokens.txt"
    users = users_with_tokens_create(count=max(args.buyers, args.hammer_buyers), prefix="load")
    tokens.write_text("".join(f"{u} {t}\n" for u, t in users))
    staff_token = staff_token_create(prefix="load-staff")
    connections.close_all()

    try:
        results = run_matrix(args, pairs, tokens, staff_token)
    except LoadRunFailed as failure:
        raise SystemExit(f"[loadtest] {failure}") from None

    meta = {
        "when": timezone.now().isoformat(timespec="seconds"),
        "command": " ".join(["python -m loadtests.run", *(argv if argv is not None else sys.argv[1:])]),
        "users": args.users,
        "buyers": args.buyers,
        "spawn_rate": args.spawn_rate,
        "duration_s": args.duration,
        "stock": args.stock,
        "buckets": ",".join(map(str, args.buckets)),
        "prizes": args.prizes,
        "draws_per_user": args.draws_per_user,
        "no_prize_weight": args.no_prize_weight,
        "server_processes": args.server_processes,
        "locust_processes": args.locust_processes,
        "race_window_ms": args.race_window_ms,
        "drain_timeout_s": args.drain_timeout,
        "hold_seconds": args.hold_seconds,
        "payment_delay_ms": args.payment_delay_ms,
        "machine": describe(),
    }
    print()
    print(matrix_text(results), flush=True)
    write_outputs(args.out, results, meta)
    failed = [r for r in results if not r.ok]
    print()
    say(f"report: {args.out / 'report.html'}")
    if failed:
        for r in failed:
            say(f"FAIL: {r.scenario} / {r.strategy}: {r.verdict}")
        return 1
    say("every safe strategy held every invariant, and every unsafe one was caught breaking one")
    return 0


def _bucket_counts(text: str) -> list[int]:
    """``--buckets``: comma-separated whole numbers from 1 to 64, each once, in the order given."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or not all(1 <= count <= 64 for count in counts):
        raise argparse.ArgumentTypeError("whole numbers from 1 to 64, comma-separated")
    return list(dict.fromkeys(counts))


def _pairs(runs: str) -> list[tuple[str, str, str]]:
    return [run.strip().partition(":") for run in runs.split(",") if run.strip()]


def run_matrix(args, pairs: list[tuple[Scenario, str]], tokens: Path, staff_token: str) -> list[Result]:
    """The baseline, then every (repeat, scenario, strategy) against one server."""
    # Only once Django is set up.
    from inventory.strategies import STRATEGIES

    from .lifecycle import describe_settings, server_settings
    from .one_run import baseline_run, one_run

    results: list[Result] = []
    lifecycle = any(scenario.lifecycle for scenario, _ in pairs)
    with running_server(
        database_url=args.database_url,
        redis_url=args.redis_url,
        processes=args.server_processes,
        race_window_ms=args.race_window_ms,
        port=args.port,
        broker_url=args.broker_url,
        # Only a deferred strategy and the lifecycle (expiry, the provider's callbacks) need
        # them; the other runs are measured without them.
        celery=lifecycle or any(STRATEGIES[strategy].deferred for _, strategy in pairs),
        celery_log=args.out / "celery.log",
        settings=server_settings(args.payment_delay_ms) if lifecycle else None,
        say=say,
    ) as server:
        if lifecycle:
            say(f"lifecycle: holds of {args.hold_seconds} s, {describe_settings(args.payment_delay_ms)}")
        if not args.no_baseline:
            say(f"baseline: no-op JSON endpoint, {args.baseline_users} users for {args.duration}s ...")
            results.append(baseline_run(args, server))
            say(f"  {results[-1].rps:,.0f} req/s")
        runs = [
            (repeat, scenario, strategy, buckets)
            for repeat in range(1, args.repeat + 1)
            for scenario, strategy in pairs
            for buckets in args.buckets
        ]
        for n, (repeat, scenario, strategy, buckets) in enumerate(runs, start=1):
            shape = f", {buckets} buckets" if buckets > 1 else ""
            say(f"[{n}/{len(runs)}] {scenario.name} / {strategy}{shape}: {args.users} users for {args.duration}s ...")
            label = bucketed_name(strategy, buckets)
            name = f"{scenario.name}-{label}" + (f"-{repeat}" if args.repeat > 1 else "")
            result = one_run(args, scenario, strategy, server, tokens, staff_token, name, buckets=buckets)
            results.append(result)
            if result.crowd_ran_out:
                say("  the crowd ran out before the run ended: req/s understates; raise --buyers")
            say(f"  {summary(result)}")
    return results


if __name__ == "__main__":
    sys.exit(main())
