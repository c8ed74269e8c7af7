"""What every request, periodic job and command costs on a site with a long history against a
small one, side by side in one run: queries, wall time and database time.

    .venv/bin/python -m benchmarks.history [--rebuild] [--repeat 5] [--small 300]
        [--users 500000] [--vouchers 20] [--orders 400000] [--pools 5] [--draws 200000]
        [--small-database-url mysql://root:@127.0.0.1:3306/flashsale_history_small]
        [--big-database-url mysql://root:@127.0.0.1:3306/flashsale_history_big]
        [--redis-url redis://127.0.0.1:6379/3] [--explain-rows 5000] [--only TEXT] [--json PATH]

Two sites in two MariaDB databases, built by ``manage.py seed_big`` (docs/operations.md, "A big
site"): the small one with ``--small`` users, orders and draws (300 by default), the big one
with the sizes given (500,000 users with a token each, 20 vouchers with 400,000 orders and
their payments, 5 pools with 200,000 draws by default). The small site is built afresh on
every run (in a second: what a run adds would soon double it); the big one is built once
(about 30 s) and reused while its database holds the sizes asked for
(``var/bench/history-<database>.json`` records them), a few hundred records more after each
run; ``--rebuild`` builds it again.

Each site is measured in a process of its own (its own ``DATABASE_URL``), in the same order:

- every public page and the fragments the pages poll, anonymous, and as a buyer where the page
  shows the buyer's own (the busiest buyer: 121 orders at the default sizes), and the page's
  buttons (buy, draw, pay, cancel, claim, each by a new buyer);
- every API call, with a bearer token, and one whose token check reads the revocations;
- the staff's pages (the admin's lists and change pages) and the staff API (the audits);
- each beat task (``CELERY_BEAT_SCHEDULE``) called as the worker calls it, with nothing to do
  and with the same small work on both sites (reservations waiting, drift, holds due, charges
  to send again);
- ``manage.py audit`` and ``manage.py reconcile``.

Requests go through Django's test client (the whole middleware stack, no network). A case runs
once to warm up, then ``--repeat`` times (once more only, when the first took over 2 s), with
whatever it needs made before each run and not timed; figures are medians. Queries are
counted and timed one by one (a wrapper on the connection): database time is their sum.
The Celery broker is in memory (no worker runs): what a task sends is counted, not done. For
every query of the big site whose ``EXPLAIN`` says it reads more than ``--explain-rows`` rows of
one table, the plan is printed after the table.

Targets (marked ``OVER`` when missed): pages, fragments and API calls at most 1.5x the small
site's time (plus 1 ms: less is noise) and 10 ms of database time on the big site; a beat
task with nothing to do at most 50 ms; the admin's pages (lists and change pages) at most
200 ms; ``manage.py audit`` at most 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.big_site import BIG_SITE_BUSIEST_BUYER, BIG_SITE_SIZES
from harness.server import ROOT

from .history_measure import SLOW_SECONDS
from .report import say

VAR = ROOT / "var" / "bench"
SIZES = ("users", "vouchers", "orders", "pools", "draws")
# The small site's items are the big one's; its users, orders and draws are --small each.
SMALL_ITEMS = ("vouchers", "pools")

PAGE_RATIO, PAGE_DB_MS, BEAT_IDLE_MS, ADMIN_MS, AUDIT_MS = 1.5, 10.0, 50.0, 200.0, 5000.0
# A difference this small is the clock's noise on a shared machine, not growth.
NOISE_MS = 1.0


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=300, help="the small site's users, orders and draws")
    for name in SIZES:
        parser.add_argument(f"--{name}", type=int, default=None, help=f"the big site's {name} (seed_big's default)")
    parser.add_argument("--rebuild", action="store_true", help="build both sites again")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case, after one to warm up")
    parser.add_argument("--explain-rows", type=int, default=5000, help="print the plans reading more rows")
    parser.add_argument("--only", default="", help="only the cases whose name holds this text")
    parser.add_argument("--json", type=Path, default=None, help="also write the results to this file")
    parser.add_argument(
        "--small-database-url",
        default=os.environ.get(
            "BENCH_HISTORY_SMALL_DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_history_small"
        ),
    )
    parser.add_argument(
        "--big-database-url",
        default=os.environ.get("BENCH_HISTORY_BIG_DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_history_big"),
    )
    # A Redis database nothing else here uses (see benchmarks.http for the others').
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_HISTORY_REDIS_URL", "redis://127.0.0.1:6379/3"))
    # Internal: measure one site in this process.
    parser.add_argument("--site", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# The parent: builds what is missing, runs one process per site, prints the table.


def _database(url: str) -> tuple[Any, str]:
    import dj_database_url
    import MySQLdb

    parts = dj_database_url.parse(url)
    connection = MySQLdb.connect(
        host=parts["HOST"] or "127.0.0.1", port=int(parts["PORT"] or 3306), user=parts["USER"],
        passwd=parts["PASSWORD"] or "",
    )  # fmt: skip
    return connection, parts["NAME"]


def _built(url: str, sizes: dict) -> bool:
    """Whether the database holds a site built with ``sizes`` (its record says so, and its
    first user is there)."""
    connection, name = _database(url)
    record = VAR / f"history-{name}.json"
    try:
        cursor = connection.cursor()
        cursor.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'auth_user'", [name]
        )
        if cursor.fetchone() is None:
            return False
        cursor.execute(f"SELECT 1 FROM `{name}`.auth_user WHERE username = %s", [BIG_SITE_BUSIEST_BUYER])
        there = cursor.fetchone() is not None
    finally:
        connection.close()
    return there and record.exists() and json.loads(record.read_text()) == sizes


def _drop(url: str) -> None:
    connection, name = _database(url)
    try:
        cursor = connection.cursor()
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    finally:
        connection.close()


def _site_run(args, which: str, url: str, sizes: dict, *, afresh: bool = False) -> dict:
    build = afresh or args.rebuild or not _built(url, sizes)
    if build:
        _drop(url)
        say(f"{which} site: building {', '.join(f'{n:,} {name}' for name, n in sizes.items())} ...")
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    command = [sys.executable, "-m", "benchmarks.history", "--site", which, "--sizes", json.dumps(sizes),
               "--out", str(out), "--repeat", str(args.repeat), "--explain-rows", str(args.explain_rows),
               "--only", args.only, "--database-url", url, "--redis-url", args.redis_url]  # fmt: skip
    if build:
        command.append("--build")
    env = {
        key: value for key, value in os.environ.items() if key not in ("INSTANCE_NAMESPACE", "DJANGO_SETTINGS_MODULE")
    }
    subprocess.run(command, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, check=True)
    result = json.loads(out.read_text())
    out.unlink()
    if build:
        _, name = _database(url)
        VAR.mkdir(parents=True, exist_ok=True)
        (VAR / f"history-{name}.json").write_text(json.dumps(sizes))
    return result


def _verdict(kind: str, name: str, small: dict, big: dict) -> tuple[str, str]:
    """The target of the row, and OVER when the big site misses it."""
    if kind in ("page", "api"):
        over = big["ms"] > PAGE_RATIO * small["ms"] + NOISE_MS or big["db_ms"] > PAGE_DB_MS
        return f"<={PAGE_RATIO:g}x, db<={PAGE_DB_MS:g}ms", "OVER" if over else "ok"
    if kind == "beat-idle":
        return f"<={BEAT_IDLE_MS:g} ms", "OVER" if big["ms"] > BEAT_IDLE_MS else "ok"
    if kind.startswith("admin"):
        return f"<={ADMIN_MS:g} ms", "OVER" if big["ms"] > ADMIN_MS else "ok"
    if name == "manage.py audit":
        return f"<={AUDIT_MS / 1000:g} s", "OVER" if big["ms"] > AUDIT_MS else "ok"
    return "", ""


def report(small: dict, big: dict) -> list[dict]:
    rows = []
    print(f"{'':<52}{'queries':>15}  {'ms (median)':>19}  {'ratio':>6}  {'db ms':>15}  {'target':<20}")
    print(f"{'':<52}{'small':>7} {'big':>7}  {'small':>9} {'big':>9}  {'big/sm':>6}  {'small':>7} {'big':>7}")
    kind = None
    for name, b in big["cases"].items():
        s = small["cases"].get(name)
        if s is None:
            continue
        if b["kind"] != kind:
            kind = b["kind"]
            print(f"-- {kind}")
        if "error" in s or "error" in b:
            print(f"{name:<52}  ERROR: {s.get('error') or b.get('error')}")
            continue
        target, verdict = _verdict(b["kind"], name, s, b)
        ratio = b["ms"] / s["ms"] if s["ms"] else 0.0
        http = isinstance(b["status"], int)
        answered = f" [{s['status']}/{b['status']}]" if not http or b["status"] >= 400 else ""
        print(
            f"{name[:52]:<52}{s['queries']:>7} {b['queries']:>7}  {s['ms']:>9.1f} {b['ms']:>9.1f}  {ratio:>5.1f}x  "
            f"{s['db_ms']:>7.1f} {b['db_ms']:>7.1f}  {target:<20}{verdict:<4}{answered}"
        )
        rows.append({"name": name, "kind": b["kind"], "small": s, "big": b, "ratio": ratio, "target": target,
                     "verdict": verdict})  # fmt: skip
    return rows


def report_explains(big: dict, threshold: int) -> None:
    seen: set[str] = set()
    print(
        f"\nEXPLAIN of the big site's queries reading more than {threshold:,} rows of a table "
        "(under the first case that ran each)\n"
    )
    for name, case in big["cases"].items():
        for plan in case.get("explains", []):
            if plan["shape"] in seen:
                continue
            seen.add(plan["shape"])
            print(f"## {name}: {plan['ms']:.1f} ms")
            print(plan["sql"] if len(plan["sql"]) <= 600 else plan["sql"][:600] + " ...")
            columns = ("table", "type", "key", "rows", "Extra")
            print("   " + " | ".join(f"{c}" for c in columns))
            for row in plan["plan"]:
                print("   " + " | ".join(str(row.get(c, "")) for c in columns))
            print()


def parent(args) -> int:
    big_sizes = {name: BIG_SITE_SIZES[name] if getattr(args, name) is None else getattr(args, name) for name in SIZES}
    small_sizes = {name: big_sizes[name] if name in SMALL_ITEMS else args.small for name in SIZES}
    started = time.perf_counter()
    # Built afresh every time (a second): what each run adds would soon double it.
    small = _site_run(args, "small", args.small_database_url, small_sizes, afresh=True)
    big = _site_run(args, "big", args.big_database_url, big_sizes)
    print("# History: what a request, a beat task and a command cost on a big site against a small one\n")
    print(f"machine: {big['machine']}; MariaDB {big['mariadb']}")
    for which, site in (("small", small), ("big", big)):
        counts = ", ".join(f"{n:,} {name}" for name, n in site["counts"].items())
        built = f"; built in {site['built_seconds']} s" if site["built_seconds"] else ""
        load = "load average {} before, {} after".format(*site["load_average"])
        print(f"{which} site ({site['database']}): {counts}{built}; {load}")
    print(
        f"Django test client in one process per site; {args.repeat} timed runs per case after one to warm up "
        f"(1 after a first over {SLOW_SECONDS:g} s), medians; db ms: the sum of the queries' own times.\n"
    )
    rows = report(small, big)
    over = [row["name"] for row in rows if row["verdict"] == "OVER"]
    print(f"\n{len(over)} of {len(rows)} rows over their target.")
    report_explains(big, args.explain_rows)
    print(f"(the run took {time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"small": small, "big": big, "rows": rows}, indent=2, default=str))
        print(f"results written to {args.json}")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.site:
        from .history_child import child

        return child(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
