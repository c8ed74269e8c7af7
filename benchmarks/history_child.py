"""``benchmarks.history`` on one site, in a process of its own (its own ``DATABASE_URL``): the
site built if asked, every case measured, the results written as JSON."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from harness.machine import describe
from harness.server import ROOT

from .history_cases import all_cases
from .history_measure import measure
from .history_site import Site
from .report import say


def child(args) -> int:
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DATABASE_URL=args.database_url,
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
    load_before = _load_average()
    cases = [case for case in all_cases(site) if args.only in case.name]
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
        "database": args.database_url.rsplit("/", 1)[-1], "built_seconds": built_seconds,
        "load_average": [load_before, _load_average()],
    }, default=str))  # fmt: skip
    return 0


def _load_average() -> str:
    """The machine's load over the last 1, 5 and 15 minutes: others' work skews every time."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


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
