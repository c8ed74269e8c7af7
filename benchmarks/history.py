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
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.machine import describe
from harness.server import ROOT

from .report import say

VAR = ROOT / "var" / "bench"
SIZES = ("users", "vouchers", "orders", "pools", "draws")
# The small site's items are the big one's; its users, orders and draws are --small each.
SMALL_ITEMS = ("vouchers", "pools")
# A first run longer than this is followed by one more only.
SLOW_SECONDS = 2.0
# The same work for the beat tasks on both sites.
WORK = 20
RESEND_WORK = 100

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
        cursor.execute(f"SELECT 1 FROM `{name}`.auth_user WHERE username = 'site-1'")
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
               "--only", args.only, "--big-database-url", url, "--redis-url", args.redis_url]  # fmt: skip
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


def _seed_defaults() -> dict[str, int]:
    """``manage.py seed_big``'s sizes (read from the command: Django set up, no database used)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    sys.path.insert(0, str(ROOT))
    from core.local_key import local_key_provide

    local_key_provide()
    import django

    django.setup()
    from config.management.commands.seed_big import DEFAULTS

    return DEFAULTS


def parent(args) -> int:
    defaults = _seed_defaults()
    big_sizes = {name: defaults[name] if getattr(args, name) is None else getattr(args, name) for name in SIZES}
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
        print(f"{which} site ({site['database']}): {counts}{built}")
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


# One site, in its own process.


@dataclass
class Case:
    """One measured thing: ``run(given)`` timed, ``given = setup()`` made before each run and
    ``teardown(given)`` after it, neither timed."""

    name: str
    kind: str
    run: Callable[[Any], Any]
    setup: Callable[[], Any] = lambda: None
    teardown: Callable[[Any], None] = lambda given: None

    def __post_init__(self) -> None:
        # Named alike on both sites: an id in a path is the site's own.
        self.name = re.sub(r"/\d+(?=[/ ]|$)", "/<id>", self.name)


@dataclass
class Recorder:
    """Every query the connection runs: its SQL, parameters and seconds."""

    queries: list[tuple[str, Any, float]] = field(default_factory=list)

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.queries.append((sql, params, time.perf_counter() - started))


def _status(answer) -> object:
    """The HTTP status of a client's answer; a task's or a command's own answer (what a task
    did, a command's exit status) as it is."""
    return getattr(answer, "status_code", None) or repr(answer)[:40]


def measure(case: Case, repeat: int, explain_rows: int, explain: bool) -> dict:
    from django.db import connection

    walls, recorders, status = [], [], "-"
    runs = repeat + 1
    n = 0
    while n < runs:
        given = case.setup()
        recorder = Recorder()
        with connection.execute_wrapper(recorder):
            started = time.perf_counter()
            answer = case.run(given)
            wall = time.perf_counter() - started
        case.teardown(given)
        status = _status(answer)
        if n == 0 and wall > SLOW_SECONDS:
            runs = 2
        if n > 0:
            walls.append(wall)
            recorders.append(recorder)
        n += 1
    last = recorders[-1]
    result = {
        "kind": case.kind,
        "status": status,
        "queries": len(last.queries),
        "ms": statistics.median(walls) * 1000,
        "runs_ms": [round(w * 1000, 2) for w in walls],
        "db_ms": statistics.median(sum(q[2] for q in r.queries) for r in recorders) * 1000,
    }
    if explain:
        result["explains"] = _explains(last, explain_rows)
    return result


def _explains(recorder: Recorder, threshold: int) -> list[dict]:
    """The plans of the run's SELECTs that read more than ``threshold`` rows of one table."""
    from django.db import connection

    plans, seen = [], set()
    for sql, params, seconds in recorder.queries:
        if not sql.lstrip().upper().startswith("SELECT") or sql in seen or isinstance(params, list):
            continue
        seen.add(sql)
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN {sql}", params)
            names = [column[0] for column in cursor.description]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            # The statement as the server got it, the parameters in place.
            shown = connection.ops.last_executed_query(cursor.cursor, sql, params).removeprefix("EXPLAIN ")
        if max((_rows_read(row) for row in rows), default=0) > threshold:
            plans.append({"shape": sql, "sql": shown, "ms": seconds * 1000, "plan": rows})
    return plans


def _rows_read(row: dict) -> int:
    """The rows a line of MariaDB's plan reads ("1 (1%)" where a filter applies: 1)."""
    match = re.match(r"\d+", str(row.get("rows") or 0))
    return int(match.group()) if match else 0


def child(args) -> int:
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DATABASE_URL=args.big_database_url,
        REDIS_URL=args.redis_url,
        # No worker: what the tasks send stays in this process's memory.
        CELERY_BROKER_URL="memory://",
        # The provider's resend only runs with a callback address; nothing is posted to it.
        PAYMENT_CALLBACK_URL="http://127.0.0.1:9/api/payments/callback",
        RATE_LIMITS_ENABLED="false",
        DJANGO_ALLOWED_HOSTS="testserver,127.0.0.1,localhost",
    )
    sys.path.insert(0, str(ROOT))
    from core.local_key import local_key_provide

    local_key_provide()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    sizes = json.loads(args.sizes)
    built_seconds = None
    if args.build:
        started = time.perf_counter()
        _redis_forget()
        # Its progress beside the benchmark's, on stderr: stdout is the report.
        call_command("seed_big", *(f"--{name}={n}" for name, n in sizes.items()), stdout=sys.stderr)
        built_seconds = round(time.perf_counter() - started)
    site = Site()
    counts = site.counts()
    cases = [case for case in site.cases() if args.only in case.name]
    results = {}
    for case in cases:
        say(f"{args.site}: {case.name} ...")
        try:
            results[case.name] = measure(case, args.repeat, args.explain_rows, explain=args.site == "big")
        except Exception as exc:  # noqa: BLE001  (a case that breaks is reported, the others still run)
            results[case.name] = {"kind": case.kind, "error": f"{type(exc).__name__}: {exc}"[:300]}
    site.drain()
    args.out.write_text(json.dumps({
        "cases": results, "counts": counts, "machine": _machine(), "mariadb": _mariadb(),
        "database": args.big_database_url.rsplit("/", 1)[-1], "built_seconds": built_seconds,
    }, default=str))  # fmt: skip
    return 0


def _machine() -> str:
    import redis
    from django.conf import settings

    return describe(redis.Redis.from_url(settings.REDIS_URL))


def _mariadb() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        return cursor.fetchone()[0]


def _redis_forget() -> None:
    """The keys a site of the same database left (a group's state, counters, locks): a site
    built again reuses the ids."""
    import redis
    from django.conf import settings

    from core.namespace import instance_key

    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(match=instance_key("*"), count=1000):
        client.delete(key)


class Site:
    """The site being measured: who and what the cases use, and the cases."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from django.utils import timezone

        from lottery.models import Draw, Pool
        from orders.models import Order, Voucher

        User = get_user_model()
        now = timezone.now()
        live = {"end_at__gt": now, "begin_at__lte": now, "listed": True}
        self.busy = User.objects.get(username="site-1")
        self.voucher = Voucher.objects.filter(strategy="db_atomic", hold_seconds__gt=0, **live).latest("id")
        self.lua_voucher = Voucher.objects.filter(strategy="redis_lua", **live).latest("id")
        self.pool = Pool.objects.filter(strategy="db_atomic", hold_seconds__gt=0, **live).latest("id")
        self.lua_pool = Pool.objects.filter(strategy="redis_lua", **live).latest("id")
        self.order = Order.objects.filter(user=self.busy).latest("id")
        self.draw = Draw.objects.filter(user=self.busy).latest("id")
        self.staff, made = User.objects.get_or_create(username="history-staff", defaults={"is_staff": True})
        if made or not self.staff.is_superuser:
            self.staff.is_superuser = True
            self.staff.set_unusable_password()
            self.staff.save()
        self.run_id = int(time.time())
        self.made = 0

    # Who.

    def new_user(self):
        from django.contrib.auth import get_user_model

        self.made += 1
        user = get_user_model()(username=f"history-{self.run_id}-{self.made}")
        user.set_unusable_password()
        user.save()
        return user

    @staticmethod
    def browser(user=None):
        from django.test import Client

        client = Client()
        if user is not None:
            client.force_login(user)
        return client

    @staticmethod
    def bearer(user):
        from django.test import Client

        from accounts.services import token_issue

        return Client(headers={"Authorization": f"Bearer {token_issue(user=user)}"})

    # What a case needs made first.

    def held_order(self):
        """A new buyer's order of the live voucher held for payment."""
        from orders.services import order_purchase

        user = self.new_user()
        return user, order_purchase(user=user, voucher=self.voucher)

    def held_draw(self):
        """A new user's draw of a prize of the live pool, held for its claim."""
        from lottery.services import pool_draw

        while True:
            user = self.new_user()
            for _ in range(self.pool.draws_per_user):
                draw = pool_draw(user=user, pool=self.pool)
                if draw.prize_id is not None:
                    return user, draw

    def holds_due(self, kind: str) -> list[int]:
        """``WORK`` holds of the kind made by new users, their deadline moved into the past."""
        from datetime import timedelta

        from django.utils import timezone

        from lottery.models import Draw
        from orders.models import Order

        taken = [self.held_order()[1] if kind == "voucher" else self.held_draw()[1] for _ in range(WORK)]
        model = Order if kind == "voucher" else Draw
        ids = [record.pk for record in taken]
        model.objects.filter(pk__in=ids).update(hold_until=timezone.now() - timedelta(seconds=1))
        return ids

    def reservations_waiting(self, kind: str) -> None:
        """``WORK`` reservations of the kind's redis_lua item, not written yet."""
        from lottery.services import pool_draw
        from orders.services import order_purchase

        for _ in range(WORK):
            if kind == "voucher":
                order_purchase(user=self.new_user(), voucher=self.lua_voucher)
            else:
                pool_draw(user=self.new_user(), pool=self.lua_pool)

    def drift(self, kind: str) -> None:
        """The redis_lua item's units in Redis three too many (reconciliation repairs them)."""
        from inventory.reservations import GroupKeys, reservations_client
        from lottery.models import Prize

        if kind == "voucher":
            group_id, stock_id = self.lua_voucher.stock.group_id, self.lua_voucher.stock_id
        else:
            group_id, stock_id = self.lua_pool.group_id, Prize.objects.filter(pool=self.lua_pool).first().stock_id
        reservations_client().client.hincrby(GroupKeys.of(group_id).state, f"stock:{stock_id}", 3)

    def charges_due(self) -> list[int]:
        """``RESEND_WORK`` acknowledged charges made unacknowledged and due again."""
        from datetime import timedelta

        from django.utils import timezone

        from payments.models import ProviderCharge

        ids = list(
            ProviderCharge.objects.filter(acknowledged_at__isnull=False)
            .order_by("id")
            .values_list("id", flat=True)[:RESEND_WORK]
        )
        ProviderCharge.objects.filter(pk__in=ids).update(
            acknowledged_at=None, sent_at=timezone.now() - timedelta(hours=1)
        )
        return ids

    @staticmethod
    def charges_acknowledged(ids: list[int]) -> None:
        from django.db.models import F

        from payments.models import ProviderCharge

        ProviderCharge.objects.filter(pk__in=ids).update(acknowledged_at=F("sent_at"))

    def drain(self) -> None:
        """Every reservation waiting written, as a worker would."""
        from inventory.tasks import reservations_drain

        for kind, item in (("voucher", self.lua_voucher), ("pool", self.lua_pool)):
            group_id = item.stock.group_id if kind == "voucher" else item.group_id
            reservations_drain.apply(args=(kind, item.pk, group_id))

    def idle(self, task: Callable[[], int]) -> Callable[[], None]:
        """Before a run with nothing to do: whatever was to do, done (untimed)."""

        def setup() -> None:
            self.drain()
            for _ in range(1000):
                if task() == 0:
                    break

        return setup

    def counts(self) -> dict:
        from django.contrib.auth import get_user_model

        from accounts.models import ApiToken
        from lottery.models import Draw, Pool
        from orders.models import Order, Voucher
        from payments.models import Payment

        return {
            "users": get_user_model().objects.count(),
            "tokens": ApiToken.objects.count(),
            "vouchers": Voucher.objects.count(),
            "orders": Order.objects.count(),
            "payments": Payment.objects.count(),
            "pools": Pool.objects.count(),
            "draws": Draw.objects.count(),
            "busiest buyer's orders": Order.objects.filter(user=self.busy).count(),
            "busiest buyer's draws": Draw.objects.filter(user=self.busy).count(),
        }

    # The cases.

    def cases(self) -> list[Case]:
        return [*self._pages(), *self._buttons(), *self._api(), *self._staff(), *self._beat(), *self._commands()]

    def _pages(self) -> list[Case]:
        v, p = self.voucher.pk, self.pool.pk
        anonymous = self.browser()
        buyer = self.browser(self.busy)
        cases = [
            Case(f"GET {path}", "page", lambda _, path=path: anonymous.get(path))
            for path in [
                "/", "/vouchers/stock", f"/vouchers/{v}/", f"/vouchers/{v}/live", "/pools/", "/pools/rows",
                f"/pools/{p}/", f"/pools/{p}/odds", f"/pools/{p}/standing", "/proof/", "/healthz", "/metrics",
            ]
        ]  # fmt: skip
        cases += [
            Case(f"GET {path} (busiest buyer)", "page", lambda _, path=path: buyer.get(path))
            for path in [
                "/", f"/vouchers/{v}/", f"/vouchers/{v}/live", f"/pools/{p}/", f"/pools/{p}/odds",
                f"/pools/{p}/standing", "/orders/", "/draws/", f"/orders/{self.order.pk}/status",
                f"/draws/{self.draw.pk}/status",
            ]
        ]  # fmt: skip
        return cases

    def _buttons(self) -> list[Case]:
        v, lua_v, p, lua_p = self.voucher.pk, self.lua_voucher.pk, self.pool.pk, self.lua_pool.pk

        def new_browser():
            return self.browser(self.new_user())

        def held_order():
            user, order = self.held_order()
            return self.browser(user), order.pk

        def held_draw():
            user, draw = self.held_draw()
            return self.browser(user), draw.pk

        takes = [
            (f"/vouchers/{v}/buy", "db_atomic"), (f"/vouchers/{lua_v}/buy", "redis_lua"),
            (f"/pools/{p}/draw", "db_atomic"), (f"/pools/{lua_p}/draw", "redis_lua"),
        ]  # fmt: skip
        return [
            *(Case(f"POST {path} ({strategy})", "page", lambda c, path=path: c.post(path), new_browser)
              for path, strategy in takes),  # fmt: skip
            Case("POST /orders/<id>/pay", "page", lambda g: g[0].post(f"/orders/{g[1]}/pay"), held_order),
            Case("POST /orders/<id>/cancel", "page", lambda g: g[0].post(f"/orders/{g[1]}/cancel"), held_order),
            Case("POST /draws/<id>/claim", "page", lambda g: g[0].post(f"/draws/{g[1]}/claim"), held_draw),
        ]  # fmt: skip

    def _api(self) -> list[Case]:
        from accounts.tokens import revocations

        v, lua_v, p, lua_p = self.voucher.pk, self.lua_voucher.pk, self.pool.pk, self.lua_pool.pk
        anonymous = self.browser()
        busy = self.bearer(self.busy)

        def new_bearer():
            return self.bearer(self.new_user())

        def held_order():
            user, order = self.held_order()
            return self.bearer(user), order.pk

        def held_draw():
            user, draw = self.held_draw()
            return self.bearer(user), draw.pk

        def revocations_read() -> None:
            revocations.revoked("")  # read now if due, so that the run reads nothing

        def revocations_due() -> None:
            revocations.read_soon()

        cases = [
            Case(f"GET {path}", "api", lambda _, path=path: anonymous.get(path))
            for path in ["/api/ping", "/api/vouchers", f"/api/vouchers/{v}", "/api/pools", f"/api/pools/{p}"]
        ]
        cases += [
            Case(f"GET {path} (busiest buyer)", "api", lambda _, path=path: busy.get(path), revocations_read)
            for path in [
                "/api/orders", f"/api/orders/{self.order.pk}", "/api/draws", f"/api/draws/{self.draw.pk}",
                "/api/auth/tokens",
            ]
        ]  # fmt: skip
        cases += [
            Case("GET /api/auth/tokens, the token check reading the revocations", "api",
                 lambda _: busy.get("/api/auth/tokens"), revocations_due),
            Case(f"POST /api/vouchers/{v}/purchase (db_atomic)", "api",
                 lambda c: c.post(f"/api/vouchers/{v}/purchase"), new_bearer),
            Case(f"POST /api/vouchers/{lua_v}/purchase (redis_lua)", "api",
                 lambda c: c.post(f"/api/vouchers/{lua_v}/purchase"), new_bearer),
            Case(f"POST /api/pools/{p}/draw (db_atomic)", "api", lambda c: c.post(f"/api/pools/{p}/draw"), new_bearer),
            Case(f"POST /api/pools/{lua_p}/draw (redis_lua)", "api",
                 lambda c: c.post(f"/api/pools/{lua_p}/draw"), new_bearer),
            Case("POST /api/orders/<id>/pay", "api", lambda g: g[0].post(f"/api/orders/{g[1]}/pay"), held_order),
            Case("POST /api/orders/<id>/cancel", "api", lambda g: g[0].post(f"/api/orders/{g[1]}/cancel"), held_order),
            Case("POST /api/draws/<id>/claim", "api", lambda g: g[0].post(f"/api/draws/{g[1]}/claim"), held_draw),
        ]  # fmt: skip
        return cases

    def _staff(self) -> list[Case]:
        from django.contrib import admin
        from django.urls import reverse

        staff = self.browser(self.staff)
        staff_api = self.bearer(self.staff)
        lists = [
            reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
            for model in sorted(admin.site._registry, key=lambda model: model._meta.label)
        ]
        cases = [Case(f"GET {path}", "admin-list", lambda _, path=path: staff.get(path)) for path in lists]
        cases += [
            Case(f"GET {path}", "admin", lambda _, path=path: staff.get(path))
            for path in [
                "/admin/",
                reverse("admin:orders_voucher_change", args=[self.voucher.pk]),
                reverse("admin:lottery_pool_change", args=[self.pool.pk]),
                reverse("admin:orders_order_change", args=[self.order.pk]),
                reverse("admin:lottery_draw_change", args=[self.draw.pk]),
                "/lab/",
            ]
        ]
        cases += [
            Case(f"GET {path}", "staff-api", lambda _, path=path: staff_api.get(path))
            for path in [f"/api/admin/vouchers/{self.voucher.pk}/audit", f"/api/admin/pools/{self.pool.pk}/audit"]
        ]
        return cases

    def _beat(self) -> list[Case]:
        from inventory.tasks import holds_sweep, reservations_reconcile, reservations_sweep
        from payments.tasks import provider_resend

        idle, work = [], []
        for kind in ("voucher", "pool"):
            for task in (reservations_sweep, reservations_reconcile, holds_sweep):
                idle.append(
                    Case(f"beat {task.__name__}({kind}), nothing to do", "beat-idle",
                         lambda _, task=task, kind=kind: task.run(kind),
                         self.idle(lambda task=task, kind=kind: task.run(kind)))
                )  # fmt: skip
            work += [
                Case(f"beat reservations_sweep({kind}), {WORK} reservations waiting", "beat-work",
                     lambda _, kind=kind: reservations_sweep.run(kind),
                     lambda kind=kind: self.reservations_waiting(kind), lambda _: self.drain()),
                Case(f"beat reservations_reconcile({kind}), a drift to repair", "beat-work",
                     lambda _, kind=kind: reservations_reconcile.run(kind), lambda kind=kind: self.drift(kind)),
                Case(f"beat holds_sweep({kind}), {WORK} holds due", "beat-work",
                     lambda _, kind=kind: holds_sweep.run(kind), lambda kind=kind: self.holds_due(kind)),
            ]  # fmt: skip
        idle.append(
            Case("beat provider_resend, nothing to do", "beat-idle", lambda _: provider_resend.run(),
                 self.idle(provider_resend.run))
        )  # fmt: skip
        work.append(
            Case(f"beat provider_resend, {RESEND_WORK} charges due", "beat-work", lambda _: provider_resend.run(),
                 self.charges_due, self.charges_acknowledged)
        )  # fmt: skip
        return idle + work

    def _commands(self) -> list[Case]:
        from io import StringIO

        from django.core.management import call_command

        def command(name: str) -> Callable[[Any], int]:
            def run(_) -> int:
                try:
                    call_command(name, stdout=StringIO())
                except SystemExit as exit_:
                    return int(exit_.code or 0)
                return 0

            return run

        return [
            Case("manage.py audit", "command", command("audit"), self.drain),
            Case("manage.py reconcile", "command", command("reconcile"), self.drain),
        ]


def main(argv=None) -> int:
    args = parse_args(argv)
    return child(args) if args.site else parent(args)


if __name__ == "__main__":
    sys.exit(main())
