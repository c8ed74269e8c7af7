"""The load-test runner: every strategy under Locust, audited, as a verdict matrix.

    .venv/bin/python -m loadtests.run [--scenario crowd] [--strategies all] [--users 50]
        [--spawn-rate 50] [--duration 15] [--server-processes 4] [--race-window-ms 20]

For each scenario and strategy it creates a fresh voucher, runs Locust headless
against a gunicorn server it started itself (several worker processes), waits
until the server has gone quiet, and audits the database against DESIGN.md
section 4 and the order ids the API confirmed. It also measures a no-op JSON
endpoint of the same server as the baseline.

Writes ``matrix.csv``, ``matrix.json``, Locust's HTML report per run and
``report.html`` (charts) under ``--out``. Exits 1 when a safe strategy breaks an
invariant, and when ``none`` or ``local`` (with several server processes) fail to
reproduce the oversell: the demonstration never loses its point in silence.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCUSTFILES = Path(__file__).resolve().parent / "locustfiles"
SCENARIOS = ("crowd", "hammer", "restock")
# Strategies expected to break an invariant under load: the point of the demonstration.
UNSAFE = {"none"}
UNSAFE_ACROSS_PROCESSES = {"local"}


@dataclass
class Result:
    scenario: str
    strategy: str
    requests: int = 0
    failures: int = 0
    confirmed: int = 0
    orders: int = 0
    supplied: int = 0
    oversold: int = 0
    duplicates: int = 0
    lost_confirmations: int = 0
    stock_left: int = 0
    conserved: bool = True
    rps: float = 0.0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    cpu_ms_per_request: float = 0.0
    race_window_ms: int = 0
    verdict: str = ""
    expected_to_break: bool = False
    ok: bool = False
    stock_series: list[tuple[float, int]] = field(default_factory=list)


def say(message: str) -> None:
    print(f"[loadtest] {message}", flush=True)


# -- the server -----------------------------------------------------------------------------------


def server_env(args, lock_urls: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DATABASE_URL=args.database_url,
        REDIS_URL=args.redis_url,
        LOCK_REDIS_URLS=",".join(lock_urls),
        RACE_WINDOW_MS=str(args.race_window_ms),
        PYTHONPATH=str(ROOT),
    )
    return env


def wait_healthy(url: str, timeout: float = 60) -> None:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"[loadtest] the server at {url} did not become healthy")


def process_tree_cpu(pid: int) -> float:
    """CPU seconds used so far by ``pid`` and its children (gunicorn's workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(child) for child in children]
    except OSError:
        pass
    for one in pids:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, IndexError, ValueError):
            pass
    return total


# -- Locust ---------------------------------------------------------------------------------------


def run_locust(args, locustfile: str, host: str, prefix: Path, env: dict[str, str], users: int) -> dict:
    """Run Locust headless; return the stats row of the busiest endpoint."""
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILES / locustfile), "--headless",
        "-u", str(users), "-r", str(args.spawn_rate), "-t", f"{args.duration}s", "--stop-timeout", "5",
        "--host", host, "--csv", str(prefix), "--html", f"{prefix}.html", "--only-summary",
        "--exit-code-on-error", "0", "--loglevel", "WARNING",
    ]  # fmt: skip
    if args.locust_processes > 1:
        command += ["--processes", str(args.locust_processes)]
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"[loadtest] Locust failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
    with open(f"{prefix}_stats.csv") as stats:
        rows = [row for row in csv.DictReader(stats) if row["Name"] != "Aggregated"]
    return max(rows, key=lambda row: int(row["Request Count"]))


# -- one run --------------------------------------------------------------------------------------


class StockSampler(threading.Thread):
    """Polls the voucher's stock while Locust runs, for the chart and the progress line."""

    def __init__(self, stock_id: int) -> None:
        super().__init__(daemon=True)
        self.stock_id = stock_id
        self.series: list[tuple[float, int]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        from django.db import connection

        from inventory.models import Stock

        started = time.monotonic()
        next_report = 5.0
        while not self.stopped.is_set():
            quantity = Stock.objects.values_list("quantity", flat=True).get(pk=self.stock_id)
            elapsed = time.monotonic() - started
            self.series.append((round(elapsed, 2), quantity))
            if elapsed >= next_report:
                say(f"  ... {elapsed:.0f}s, stock left {quantity}")
                next_report += 5.0
            self.stopped.wait(0.25)
        connection.close()


def wait_until_quiet(stock_id: int, seconds: float = 1.0, timeout: float = 30) -> None:
    """In-flight purchases finish after Locust stops: wait until nothing changes."""
    from inventory.models import Stock
    from orders.models import Order

    def snapshot():
        return (
            Stock.objects.values_list("quantity", "version").get(pk=stock_id),
            Order.objects.count(),
            Order.objects.filter(status=Order.Status.PENDING).count(),
        )

    give_up = time.monotonic() + timeout
    last, since = snapshot(), time.monotonic()
    while time.monotonic() < give_up:
        time.sleep(0.2)
        now = snapshot()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds and now[2] == 0:
            return


def one_run(
    args, scenario: str, strategy: str, host: str, server_pid: int, tokens: Path, staff_token: str, name: str
) -> Result:
    from django.utils import timezone

    from orders.models import Order
    from orders.selectors import voucher_audit
    from orders.services import voucher_create

    now = timezone.now()
    voucher = voucher_create(
        title=f"load {scenario} {strategy} {now:%H:%M:%S}", stock=args.stock, strategy=strategy,
        begin_at=now - timedelta(minutes=1), end_at=now + timedelta(hours=2),
    )  # fmt: skip
    run_dir = args.out / name
    outcomes_dir = run_dir / "outcomes"
    if outcomes_dir.exists():
        raise SystemExit(f"[loadtest] {outcomes_dir} exists: each run needs a folder of its own")
    outcomes_dir.mkdir(parents=True)
    env = dict(os.environ)
    env.update(
        LOADTEST_TOKENS=str(tokens),
        LOADTEST_VOUCHER=str(voucher.pk),
        LOADTEST_OUTCOMES=str(outcomes_dir),
        LOADTEST_STAFF_TOKEN=staff_token,
        LOADTEST_WORKERS=str(args.locust_processes),
        LOADTEST_BUYERS=str(args.hammer_buyers),
        PYTHONPATH=str(ROOT),
    )
    sampler = StockSampler(voucher.stock_id)
    sampler.start()
    cpu_before = process_tree_cpu(server_pid)
    stats = run_locust(args, f"{scenario}.py", host, run_dir / "locust", env, args.users)
    cpu_used = process_tree_cpu(server_pid) - cpu_before
    wait_until_quiet(voucher.stock_id)
    sampler.stopped.set()
    sampler.join()

    audit = voucher_audit(voucher_id=voucher.pk)
    answers = [line.split() for f in outcomes_dir.glob("*.txt") for line in f.read_text().splitlines() if line]
    confirmed_ids = [int(answer[1]) for answer in answers if answer[0] == "confirmed"]
    existing = set(Order.objects.filter(pk__in=confirmed_ids, voucher_id=voucher.pk).values_list("id", flat=True))
    lost = len(confirmed_ids) - len(existing) + (len(confirmed_ids) - len(set(confirmed_ids)))
    # Counted from the validated answers: Locust's own table can close before the last
    # in-flight requests return.
    requests = len(answers)
    result = Result(
        scenario=scenario,
        strategy=strategy,
        requests=requests,
        failures=sum(1 for answer in answers if answer[0] == "error"),
        confirmed=len(confirmed_ids),
        orders=audit.orders,
        supplied=audit.supplied,
        oversold=audit.oversold,
        duplicates=audit.duplicates,
        lost_confirmations=lost,
        stock_left=audit.stock,
        conserved=audit.conserved,
        rps=float(stats["Requests/s"]),
        p50_ms=float(stats["50%"] or 0),
        p95_ms=float(stats["95%"] or 0),
        p99_ms=float(stats["99%"] or 0),
        cpu_ms_per_request=1000 * cpu_used / max(requests, 1),
        race_window_ms=args.race_window_ms,
        stock_series=sampler.series,
    )
    judge(result, audit.ok, args.server_processes)
    return result


def judge(result: Result, invariants_hold: bool, server_processes: int) -> None:
    broken = [
        label
        for label, is_broken in (
            ("oversold", result.oversold > 0),
            ("duplicate orders", result.duplicates > 0),
            ("stock + orders != supplied", not result.conserved),
            ("confirmations lost", result.lost_confirmations > 0),
            ("stock below zero", result.stock_left < 0),
        )
        if is_broken
    ]
    if not invariants_hold and not broken:
        broken = ["audit failed"]
    result.expected_to_break = result.strategy in UNSAFE or (
        result.strategy in UNSAFE_ACROSS_PROCESSES and server_processes > 1
    )
    if result.expected_to_break:
        result.ok = bool(broken)
        result.verdict = f"broke as expected: {', '.join(broken)}" if broken else "FAILED TO REPRODUCE"
    else:
        result.ok = not broken and result.failures == 0
        if broken:
            result.verdict = f"BROKEN: {', '.join(broken)}"
        elif result.failures:
            result.verdict = f"UNEXPECTED ANSWERS ({result.failures})"
        else:
            result.verdict = "holds"


def baseline_run(args, host: str, server_pid: int) -> Result:
    cpu_before = process_tree_cpu(server_pid)
    stats = run_locust(args, "baseline.py", host, args.out / "baseline", dict(os.environ), args.baseline_users)
    cpu_used = process_tree_cpu(server_pid) - cpu_before
    requests = int(stats["Request Count"])
    return Result(
        scenario="baseline",
        strategy="no-op JSON",
        requests=requests,
        failures=int(stats["Failure Count"]),
        rps=float(stats["Requests/s"]),
        p50_ms=float(stats["50%"] or 0),
        p95_ms=float(stats["95%"] or 0),
        p99_ms=float(stats["99%"] or 0),
        cpu_ms_per_request=1000 * cpu_used / max(requests, 1),
        race_window_ms=args.race_window_ms,
        verdict="baseline",
        ok=int(stats["Failure Count"]) == 0,
    )


# -- output ---------------------------------------------------------------------------------------

COLUMNS = [
    ("scenario", "scenario"), ("strategy", "strategy"), ("requests", "requests"), ("confirmed", "confirmed"),
    ("orders", "orders"), ("supplied", "supplied"), ("oversold", "oversold"), ("duplicates", "dup orders"),
    ("lost_confirmations", "lost"), ("stock_left", "stock left"), ("rps", "req/s"), ("p50_ms", "p50 ms"),
    ("p95_ms", "p95 ms"), ("p99_ms", "p99 ms"), ("cpu_ms_per_request", "CPU ms/req"), ("verdict", "verdict"),
]  # fmt: skip


def cell(value) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"
    return str(value)


def print_matrix(results: list[Result]) -> str:
    lines = ["| " + " | ".join(label for _, label in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for result in results:
        lines.append("| " + " | ".join(cell(getattr(result, name)) for name, _ in COLUMNS) + " |")
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def write_outputs(args, results: list[Result], matrix_text: str, meta: dict) -> None:
    from .report import render_report

    rows = [{name: getattr(r, name) for name, _ in COLUMNS} | {"ok": r.ok} for r in results]
    with open(args.out / "matrix.csv", "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    document = {"meta": meta, "results": [asdict(r) for r in results]}
    (args.out / "matrix.json").write_text(json.dumps(document, indent=2))
    (args.out / "matrix.md").write_text(matrix_text + "\n")
    (args.out / "report.html").write_text(render_report(results, meta))


# -- main -----------------------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="crowd", help=f"one of {', '.join(SCENARIOS)}, or 'all'")
    parser.add_argument("--strategies", default="all", help="comma-separated names, or 'all'")
    parser.add_argument("--users", type=int, default=50, help="Locust users: the concurrency")
    # A crowd that runs out mid-run leaves Locust idle and req/s measures the crowd, not the server.
    parser.add_argument("--buyers", type=int, default=20000, help="distinct buyers (tokens) in the crowd")
    parser.add_argument("--spawn-rate", type=float, default=50)
    parser.add_argument("--duration", type=int, default=15, help="seconds of load per run")
    # Large enough that selling, not answering sold-out buyers, fills a good part of the run:
    # the matrix then measures each strategy's guarded write, and the chart shows its pace.
    parser.add_argument("--stock", type=int, default=500, help="the voucher's stock at the start")
    parser.add_argument("--server-processes", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--locust-processes", type=int, default=1, help="Locust worker processes (--processes)")
    parser.add_argument("--race-window-ms", type=int, default=20, help="RACE_WINDOW_MS of the server")
    parser.add_argument("--repeat", type=int, default=1, help="run the whole matrix this many times")
    parser.add_argument("--hammer-buyers", type=int, default=3, help="buyers sharing the hammer's Locust users")
    parser.add_argument("--baseline-users", type=int, default=20)
    parser.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: var/loadtest/<time>)")
    parser.add_argument(
        "--database-url", default=os.environ.get("LOADTEST_DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_load")
    )
    parser.add_argument("--redis-url", default=os.environ.get("LOADTEST_REDIS_URL", "redis://127.0.0.1:6379/10"))
    return parser.parse_args(argv)


def setup_django(args) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.base"
    os.environ["DATABASE_URL"] = args.database_url
    os.environ["REDIS_URL"] = args.redis_url
    sys.path.insert(0, str(ROOT))
    if args.database_url.startswith("mysql"):
        import dj_database_url
        import MySQLdb

        parts = dj_database_url.parse(args.database_url)
        connection = MySQLdb.connect(
            host=parts["HOST"] or "127.0.0.1", port=int(parts["PORT"] or 3306), user=parts["USER"],
            passwd=parts["PASSWORD"] or "",
        )  # fmt: skip
        connection.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{parts['NAME']}` CHARACTER SET utf8mb4")
        connection.close()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def main(argv=None) -> int:
    args = parse_args(argv)
    setup_django(args)

    from django.db import connections

    from accounts.services import users_with_tokens_create
    from inventory.models import Strategy
    from locking.testing import RedisServer, free_port

    scenarios = SCENARIOS if args.scenario == "all" else tuple(args.scenario.split(","))
    strategies = Strategy.values if args.strategies == "all" else args.strategies.split(",")
    unknown = [s for s in strategies if s not in Strategy.values] + [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        raise SystemExit(f"[loadtest] unknown: {', '.join(unknown)}")
    args.out = args.out or ROOT / "var" / "loadtest" / datetime.now().strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)

    say(f"writing to {args.out}")
    tokens = args.out / "tokens.txt"
    pairs = users_with_tokens_create(count=max(args.buyers, args.hammer_buyers), prefix="load")
    tokens.write_text("".join(f"{u} {t}\n" for u, t in pairs))
    staff_token = users_with_tokens_create(count=1, prefix="load-staff", staff=True)[0][1]
    connections.close_all()

    lock_servers = [RedisServer().start() for _ in range(3)]
    port = args.port or free_port()
    host = f"http://127.0.0.1:{port}"
    env = server_env(args, [server.url for server in lock_servers])
    say(f"starting gunicorn: {args.server_processes} worker processes on {host}, RACE_WINDOW_MS={args.race_window_ms}")
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", str(args.server_processes), "--log-level", "warning"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    results: list[Result] = []
    try:
        wait_healthy(host)
        say(f"baseline: no-op JSON endpoint, {args.baseline_users} users for {args.duration}s ...")
        results.append(baseline_run(args, host, server.pid))
        say(f"  {results[-1].rps:,.0f} req/s")
        total = len(scenarios) * len(strategies) * args.repeat
        n = 0
        for repeat in range(1, args.repeat + 1):
            for scenario in scenarios:
                for strategy in strategies:
                    n += 1
                    say(f"[{n}/{total}] {scenario} / {strategy}: {args.users} Locust users for {args.duration}s ...")
                    name = f"{scenario}-{strategy}" + (f"-{repeat}" if args.repeat > 1 else "")
                    result = one_run(args, scenario, strategy, host, server.pid, tokens, staff_token, name)
                    results.append(result)
                    if scenario != "hammer" and result.requests >= 0.98 * args.buyers:
                        say("  the crowd ran out before the run ended: req/s understates; raise --buyers")
                    say(
                        f"  confirmed {result.confirmed}, orders {result.orders} of {result.supplied} supplied, "
                        f"oversold {result.oversold}, duplicates {result.duplicates}, {result.rps:,.0f} req/s: "
                        f"{result.verdict}"
                    )
    finally:
        server.terminate()
        server.wait(30)
        for lock_server in lock_servers:
            lock_server.close()

    meta = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(["python -m loadtests.run", *(argv if argv is not None else sys.argv[1:])]),
        "users": args.users,
        "buyers": args.buyers,
        "spawn_rate": args.spawn_rate,
        "duration_s": args.duration,
        "stock": args.stock,
        "server_processes": args.server_processes,
        "locust_processes": args.locust_processes,
        "race_window_ms": args.race_window_ms,
        "machine": machine(),
    }
    print()
    matrix_text = print_matrix(results)
    write_outputs(args, results, matrix_text, meta)
    failed = [r for r in results if not r.ok]
    print()
    say(f"report: {args.out / 'report.html'}")
    if failed:
        for r in failed:
            say(f"FAIL: {r.scenario} / {r.strategy}: {r.verdict}")
        return 1
    say("every safe strategy held every invariant, and every unsafe one was caught overselling")
    return 0


def machine() -> str:
    from benchmarks.machine import describe

    return describe()


if __name__ == "__main__":
    sys.exit(main())
