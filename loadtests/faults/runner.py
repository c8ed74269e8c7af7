"""The fault runner's command line and runs (see the package's docstring)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from harness.django_setup import setup_django
from harness.server import ROOT, running_server
from locking.testing import RedisServer, start_cluster

from ..console import say
from ..scenarios import SCENARIOS, Scenario, scenarios_named
from .failover import NODE_TIMEOUT_MS
from .kinds import Fault
from .mariadb import MariaDBServer
from .registry import FAULTS
from .stage import Stage
from .strike import Strike, health, lock_events
from .table import FaultRow, judged, seconds, table

# Enough that the sale still runs when the fault strikes and after it ends: a fault that
# finds everything sold tests only the sold-out answer.
DEFAULT_STOCK = 2000


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m loadtests.faults",
        description=sys.modules[__package__].__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--faults", default="all", help=f"comma-separated, of {', '.join(FAULTS)}; or 'all'")
    parser.add_argument(
        "--strategies",
        default="default",
        help="comma-separated, each fault running those it concerns; 'default': each fault's own",
    )
    parser.add_argument(
        "--runs",
        default=None,
        help="fault:strategy pairs, comma-separated (worker-kill:redis_lock,...): exactly those, instead of "
        "--faults and --strategies",
    )
    parser.add_argument("--scenario", default="crowd,draw-crowd", help=f"comma-separated, of {', '.join(SCENARIOS)}")
    parser.add_argument("--duration", type=int, default=20, help="seconds of load per run")
    parser.add_argument("--fault-at", type=float, default=6, help="seconds into the load when the fault strikes")
    parser.add_argument("--down", type=float, default=2, help="seconds a stopped dependency stays down")
    parser.add_argument("--users", type=int, default=30, help="Locust users: the concurrency")
    parser.add_argument("--spawn-rate", type=float, default=30)
    parser.add_argument("--buyers", type=int, default=20000, help="distinct buyers (tokens) in the crowd")
    parser.add_argument(
        "--stock",
        type=int,
        default=None,
        help="the voucher's stock, or the pool's over its prizes (default 2,000; the lifecycle's faults use their own, "
        "which their crowd sells out)",
    )
    parser.add_argument(
        "--hold-seconds",
        type=int,
        default=0,
        help="the items' hold window (payment, claim): every take held that long, released unless paid, and the "
        "run judged once drained (default 0, none; the lifecycle's faults their own)",
    )
    parser.add_argument(
        "--sweep-seconds",
        type=int,
        default=None,
        help="HOLDS_SWEEP_SECONDS of the server's beat: how often it releases holds whose task was lost "
        "(default: the settings', 5 s)",
    )
    parser.add_argument("--prizes", type=int, default=5)
    parser.add_argument("--draws-per-user", type=int, default=3)
    parser.add_argument("--no-prize-weight", type=int, default=0)
    parser.add_argument("--server-processes", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--locust-processes", type=int, default=1)
    parser.add_argument("--race-window-ms", type=int, default=0, help="RACE_WINDOW_MS of the server")
    parser.add_argument("--hammer-buyers", type=int, default=3)
    parser.add_argument("--drain-timeout", type=float, default=120)
    parser.add_argument(
        "--lock-lease",
        type=float,
        default=None,
        help="LOCK_LEASE_SECONDS of the server and worker: how long lock-holder-stopped must stop a holder "
        "(default: the settings', 5 s)",
    )
    parser.add_argument(
        "--claim-idle-ms",
        type=int,
        default=None,
        help="RESERVATIONS_CLAIM_IDLE_MS of the server and worker: how soon a killed worker's batch is taken over "
        "(default: the settings', 30 s)",
    )
    parser.add_argument(
        "--replica-lag",
        type=float,
        default=None,
        help="seconds the failover faults let their master write with its replica cut off before they kill it "
        "(default 0.3; 0: the kill alone)",
    )
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: var/faults/<time>)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("LOADTEST_DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_load"),
        help="the server's database; with a MariaDB of the runner's own, only its name is used",
    )
    parser.add_argument(
        "--own-mariadb",
        action="store_true",
        help="serve from a MariaDB server of the runner's own (always so when mariadb-restart runs)",
    )
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.lock_lease is not None:
        os.environ["LOCK_LEASE_SECONDS"] = str(args.lock_lease)  # the server's and worker's environment
    if args.sweep_seconds is not None:
        os.environ["HOLDS_SWEEP_SECONDS"] = str(args.sweep_seconds)  # the beat's, and the verdict's bound
    if args.replica_lag is not None:
        os.environ["FAILOVER_REPLICA_LAG"] = str(args.replica_lag)  # read by the failover faults
    try:
        if args.runs:
            args.picked = {}
            for run in args.runs.split(","):
                name, _, strategy = run.partition(":")
                args.picked.setdefault(name, []).append(strategy)
            faults = [FAULTS[name]() for name in args.picked]
        else:
            args.picked = None
            faults = [FAULTS[name]() for name in (FAULTS if args.faults == "all" else args.faults.split(","))]
        # Only those the faults were written for: the lifecycle's need the load runner's
        # settings and drain (loadtests.lifecycle), which a fault run does not give them.
        scenarios = scenarios_named(args.scenario, among=SCENARIOS)
    except KeyError as unknown:
        raise SystemExit(f"[faults] unknown: {unknown.args[0]}") from None
    for fault in faults:
        if args.fault_at + fault.lasts(args.down) >= args.duration:
            raise SystemExit(
                f"[faults] {fault.name} lasts {fault.lasts(args.down):.0f} s from --fault-at: it must end within "
                "--duration, while the crowd still runs"
            )
    args.out = args.out or ROOT / "var" / "faults" / datetime.now().strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)

    own_redis = RedisServer().start()
    say(f"the server's own Redis: {own_redis.url} (no persistence; restarted empty by redis-restart)")
    own_mariadb = cluster = None
    try:
        if any(fault.reservations_cluster for fault in faults):
            cluster = start_cluster(3, replicas=1, node_timeout_ms=NODE_TIMEOUT_MS)
            say(f"the reservations' own Redis Cluster: masters {', '.join(str(node.port) for node in cluster[:3])}")
        if args.own_mariadb or any(fault.needs_own_mariadb for fault in faults):
            own_mariadb = MariaDBServer().start()
            name = urlsplit(args.database_url).path.strip("/") or "flashsale_faults"
            args.database_url = own_mariadb.url(name)
            say(f"the server's own MariaDB: {args.database_url} (killed and started again by mariadb-restart)")
        args.redis_url, args.broker_url = own_redis.url, None
        setup_django(args)
        rows = run_faults(args, faults, scenarios, own_redis, own_mariadb, cluster)
    finally:
        for node in cluster or []:
            node.close()
        if own_mariadb is not None:
            from django.db import connections

            connections.close_all()
            own_mariadb.close()
        own_redis.close()

    print()
    print(table(rows), flush=True)
    (args.out / "faults.json").write_text(
        json.dumps({"command": command_line(argv), "rows": [asdict(row) for row in rows]}, indent=1, default=str)
    )
    (args.out / "faults.md").write_text(f"Command: `{command_line(argv)}`\n\n{table(rows)}\n")
    print()
    say(f"written to {args.out}")
    failed = [row for row in rows if not row.ok]
    for row in failed:
        say(f"FAIL: {row.fault} / {row.scenario} / {row.strategy}: {row.verdict}")
    if not failed:
        say("every run held every invariant and recovered on its own")
    return 1 if failed else 0


def command_line(argv) -> str:
    return " ".join(["python -m loadtests.faults", *(argv if argv is not None else sys.argv[1:])])


def run_faults(
    args,
    faults: list[Fault],
    scenarios: list[Scenario],
    own_redis: RedisServer,
    own_mariadb: MariaDBServer | None,
    cluster: list[RedisServer] | None = None,
) -> list[FaultRow]:
    """Every (fault, scenario, strategy) of the plan, on the runner's own Redis (and MariaDB,
    when one runs; and Redis Cluster, for the faults on one)."""
    # Only once Django is set up.
    from django.db import connections

    from accounts.services import users_with_tokens_create
    from inventory.strategies import STRATEGIES, strategy_names

    plan = []
    for fault in faults:
        if args.picked is not None:
            wanted = tuple(args.picked[fault.name])
        elif args.strategies == "default":
            wanted = fault.strategies
        else:
            wanted = tuple(args.strategies.split(","))
        unknown = [s for s in wanted if s not in strategy_names()]
        if unknown:
            raise SystemExit(f"[faults] unknown: {', '.join(unknown)}")
        concerned = tuple(s for s in wanted if fault.concerns(s, deferred=STRATEGIES[s].deferred))
        if args.picked is not None and concerned != wanted:
            idle = ", ".join(s for s in wanted if s not in concerned)
            raise SystemExit(f"[faults] {fault.name} has nothing to show under {idle}")
        shown = [scenario for scenario in scenarios if scenario.product in fault.products]
        plan += [(fault, scenario, strategy) for scenario in shown for strategy in concerned]

    tokens = args.out / "tokens.txt"
    pairs = users_with_tokens_create(count=max(args.buyers, args.hammer_buyers), prefix="fault")
    tokens.write_text("".join(f"{u} {t}\n" for u, t in pairs))
    staff_token = users_with_tokens_create(count=1, prefix="fault-staff", staff=True)[0][1]
    connections.close_all()
    # The locustfiles take a 503 with Retry-After as documented, and log every answer's time.
    os.environ.update(LOADTEST_UNAVAILABLE_OK="1", LOADTEST_ANSWERS="1")
    if args.claim_idle_ms is not None:
        os.environ["RESERVATIONS_CLAIM_IDLE_MS"] = str(args.claim_idle_ms)  # the server's and worker's environment
    # Where lock-holder-stopped arms the fault point that stops a lock holder (core.faultpoints).
    fault_points = args.out / "fault-points"
    fault_points.mkdir(exist_ok=True)
    os.environ["FAULT_POINTS_DIR"] = str(fault_points)

    # The runs of a fault on the cluster get a server of their own (their settings are
    # theirs alone); every other run shares one.
    servers: dict[str, list] = {}
    for run in plan:
        servers.setdefault(run[0].name if run[0].reservations_cluster else "", []).append(run)
    rows: list[FaultRow] = []
    for own, runs in servers.items():
        rows += serve_runs(
            args, runs, numbered=(len(rows), len(plan)), own_redis=own_redis, own_mariadb=own_mariadb,
            cluster=cluster if own else None, fault_points=fault_points, tokens=tokens, staff_token=staff_token,
        )  # fmt: skip
    return rows


def serve_runs(
    args,
    plan: list,
    *,
    numbered: tuple[int, int],
    own_redis: RedisServer,
    own_mariadb: MariaDBServer | None,
    cluster: list[RedisServer] | None,
    fault_points: Path,
    tokens: Path,
    staff_token: str,
) -> list[FaultRow]:
    """The runs of ``plan`` against one server, started for them; ``numbered``: the runs
    before them, and of the whole plan. With ``cluster``, its processes and this one keep
    redis_lua's reservations on it."""
    from django.db import connections
    from django.test.utils import override_settings

    from inventory.strategies import STRATEGIES

    from ..one_run import one_run
    from .lifecycle import drained

    settings: dict[str, str] = {}
    for fault in {fault.name: fault for fault, _, _ in plan}.values():
        settings.update(fault.server_settings(args.down))
    rows: list[FaultRow] = []
    with ExitStack() as stack:
        if cluster is not None:
            nodes = ",".join(node.url for node in cluster)
            settings |= {"RESERVATIONS_REDIS_URL": nodes, "RESERVATIONS_REDIS_CLUSTER": "1"}
            # This process's too: it loads the items' states and reads their streams.
            stack.enter_context(override_settings(RESERVATIONS_REDIS_URL=nodes, RESERVATIONS_REDIS_CLUSTER=True))
        server = stack.enter_context(
            running_server(
                database_url=args.database_url,
                redis_url=own_redis.url,
                processes=args.server_processes,
                race_window_ms=args.race_window_ms,
                # Holds are released by the worker (a task at each deadline, the beat's sweep).
                celery=any(STRATEGIES[strategy].deferred or holding(args, fault) for fault, _, strategy in plan),
                celery_log=args.out / "celery.log",
                settings=settings,
                say=say,
            )
        )
        stage = Stage(
            server=server,
            redis=own_redis,
            mariadb=own_mariadb,
            cluster=cluster,
            fault_points=fault_points,
            celery_log=args.out / "celery.log",
            worker_pid=server.worker_pid,
            tokens=tokens,
        )
        try:
            for n, (fault, scenario, strategy) in enumerate(plan, start=numbered[0] + 1):
                run_args = run_arguments(args, fault)
                load = f"{args.users} users, {run_args.duration}s, stock {run_args.stock}"
                if run_args.hold_seconds:
                    load += f", held {run_args.hold_seconds}s"
                say(f"[{n}/{numbered[1]}] {fault.name} / {scenario.name} / {strategy}: {load}")
                stage.product = scenario.product
                strike = Strike(fault, stage, args.fault_at, args.down)
                restarts = stage.worker_restarts
                name = f"{fault.name}-{scenario.name}-{strategy}"
                events_before = lock_events(server.host)
                result = one_run(
                    run_args, scenario, strategy, server, tokens, staff_token, name, observe=strike.observe
                )
                strike.wait()
                events = {key: n - events_before.get(key, 0) for key, n in lock_events(server.host).items()}
                life, seen = None, ([], [])
                if run_args.hold_seconds:
                    life = drained(
                        scenario.product, strike.target, hold_seconds=run_args.hold_seconds, strategy=strategy,
                        timeout=args.drain_timeout, repair=fault.repairs_returns,
                    )  # fmt: skip
                    seen = fault.drained(scenario.product, strike.target)
                    connections.close_all()
                row = judged(
                    args, fault, strike, result, STRATEGIES[strategy].deferred, args.out / name, events, life, seen
                )
                if stage.worker_restarts > restarts:
                    row.verdict += (
                        f"; the Celery worker exited and was started again ({stage.worker_restarts - restarts})"
                    )
                rows.append(row)
                say(f"  {rows[-1].verdict}; recovered in {seconds(rows[-1].recover_s)}")
                ready(server.host, own_redis)
        finally:
            stage.stop_started()
    return rows


def holding(args, fault: Fault) -> bool:
    """Whether the fault's runs hold their takes."""
    return bool(fault.hold_seconds or args.hold_seconds)


def run_arguments(args, fault: Fault) -> argparse.Namespace:
    """The run's arguments: the hold window and stock of the fault's own, if it has any (its
    checks count on them), else those given; the load long enough to go on for the fault's
    ``watched_after`` once it has ended."""
    hold = fault.hold_seconds or args.hold_seconds
    stock = fault.stock or (args.stock if args.stock is not None else DEFAULT_STOCK)
    duration = max(args.duration, math.ceil(args.fault_at + fault.lasts(args.down) + fault.watched_after))
    return argparse.Namespace(
        **(vars(args) | {"hold_seconds": hold, "stock": stock, "duration": duration, "holds_every_scenario": True})
    )


def ready(host: str, own_redis: RedisServer, timeout: float = 60) -> None:
    """Wait until the server's Redis and /healthz answer before the next run."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if own_redis.running and health(host).startswith("200"):
            return
        time.sleep(0.2)
    raise SystemExit("[faults] the server did not become healthy again after the fault")
