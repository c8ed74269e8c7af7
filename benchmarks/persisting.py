"""Part 4 of ``benchmarks.http``: a real Celery worker persisting ``redis_lua``'s reservations,
first the backlog the runs before left waiting, then beside a crowd; and its report."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.server import ROOT, process_tree_cpu

from .client import post_requests
from .cpu import Run
from .report import say
from .seeding import AMPLE

if TYPE_CHECKING:
    from .context import Context


def broker_app(broker_url: str):
    """A Celery app on ``broker_url`` under this instance's broker options (its namespace, which
    the worker started on the same database shares), to ping, purge and send to that worker."""
    from celery import Celery
    from django.conf import settings

    return Celery(broker=broker_url, broker_transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS)


@contextmanager
def celery_worker(env: dict[str, str], broker_url: str) -> Iterator[subprocess.Popen]:
    """A Celery worker of concurrency 1 on the server's settings and broker, ready to take tasks."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "--quiet", "worker", "--concurrency", "1",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env={**env, "CELERY_BROKER_URL": broker_url}, start_new_session=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with broker_app(broker_url) as app:
            give_up = time.monotonic() + 60
            while not app.control.ping(timeout=0.5):
                if worker.poll() is not None or time.monotonic() > give_up:
                    raise SystemExit("[bench] the Celery worker did not start")
        yield worker
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(10)


def broker_purge(broker_url: str) -> None:
    """Drop the drain tasks the server queued while no worker ran."""
    with broker_app(broker_url) as app:
        app.control.purge()


@dataclass(frozen=True)
class Backlog:
    """The reservations the runs before left waiting, persisted by the worker at full speed."""

    reservations: int
    seconds: float | None  # None: not persisted within DRAIN_TIMEOUT
    worker_cpu: float
    states_gone: int  # items whose Redis state vanished before (the database flushed by another process)


@dataclass(frozen=True)
class Persistence:
    backlog: Backlog
    run: Run  # the load beside the worker
    rows_at_stop: int
    waiting_at_stop: int
    drain_seconds: float | None  # None: not persisted within DRAIN_TIMEOUT
    rows: int
    worker_cpu_load: float
    worker_cpu_drain: float
    tasks: int | None  # tasks the worker ran from the load's start until every reservation was a row


DRAIN_TIMEOUT = 60
# The beat's task that asks for a drain of every redis_lua item with reservations waiting,
# and the kinds it runs for.
SWEEP = "inventory.tasks.reservations_sweep"
KINDS = ("voucher", "pool")


def _until_persisted(reservations, group_ids: list[int], since: float) -> float | None:
    """Seconds from ``since`` until no reservation of the groups waits, or None at the timeout."""
    while time.perf_counter() < since + DRAIN_TIMEOUT:
        if not any(reservations.waiting(group_id=group_id) for group_id in group_ids):
            return time.perf_counter() - since
        time.sleep(0.02)
    return None


def persistence_run(context: Context) -> Persistence:
    from django.db import connections

    from inventory.redis_lua.client import reservations_client
    from orders.models import Order

    args = context.args
    reservations = reservations_client()
    broker_purge(args.broker_url)  # the asks of the runs above: the sweeps ask again, all at once
    with celery_worker(context.server.env, args.broker_url) as worker, broker_app(args.broker_url) as app:
        groups = list(context.items.groups)
        gone = sum(1 for group_id in groups if reservations.stock(group_id=group_id) is None)
        waiting = sum(reservations.waiting(group_id=group_id) for group_id in groups)
        say(f"persistence: the {waiting:,} reservations the runs above left waiting ...")
        cpu_start, started = process_tree_cpu(worker.pid), time.perf_counter()
        for kind in KINDS:
            app.send_task(SWEEP, args=(kind,))
        persisted = _until_persisted(reservations, groups, started)
        backlog = Backlog(waiting, persisted, process_tree_cpu(worker.pid) - cpu_start, gone)
        context.items.drop()

        voucher_id, group_id = context.items.voucher("redis_lua", AMPLE)
        requests = post_requests(f"/api/vouchers/{voucher_id}/purchase", context.server.port, context.tokens)
        say(f"persistence: a redis_lua crowd for {args.persist_seconds:g} s beside the worker ...")
        tasks_start, cpu_start = _tasks_run(app), process_tree_cpu(worker.pid)
        run = context.measure(requests, args.persist_seconds)
        stopped = time.perf_counter()
        cpu_stop = process_tree_cpu(worker.pid)
        rows_at_stop = Order.objects.filter(voucher_id=voucher_id).count()
        waiting_at_stop = reservations.waiting(group_id=group_id)
        drain_seconds = _until_persisted(reservations, [group_id], stopped)
        cpu_drained = process_tree_cpu(worker.pid)
        rows = Order.objects.filter(voucher_id=voucher_id).count()
        tasks_end = _tasks_run(app)
        tasks = None if tasks_start is None or tasks_end is None else tasks_end - tasks_start
    connections.close_all()
    return Persistence(
        backlog=backlog,
        run=run,
        rows_at_stop=rows_at_stop,
        waiting_at_stop=waiting_at_stop,
        drain_seconds=drain_seconds,
        rows=rows,
        worker_cpu_load=cpu_stop - cpu_start,
        worker_cpu_drain=cpu_drained - cpu_stop,
        tasks=tasks,
    )


def _tasks_run(app) -> int | None:
    """The tasks the worker has run since it started (its own count, asked over the broker);
    None when it did not answer."""
    try:
        stats = app.control.inspect(timeout=2).stats()
    except Exception:  # noqa: BLE001  (a broker connection cut by another process: the count is only shown)
        return None
    return sum(sum(one.get("total", {}).values()) for one in stats.values()) if stats else None


def report_persistence(args, result: Persistence, alone: float) -> None:
    print("Persisting: a Celery worker, concurrency 1")
    backlog = result.backlog
    if backlog.states_gone:
        print(f"  the Redis state of {backlog.states_gone} items above was gone: something flushed {args.redis_url}")
    if backlog.seconds is None:
        print(
            f"  backlog: {backlog.reservations:,} reservations left waiting above, not persisted in {DRAIN_TIMEOUT} s"
        )
    elif backlog.reservations:
        print(
            f"  backlog: the {backlog.reservations:,} reservations left waiting above, persisted in "
            f"{backlog.seconds:.2f} s ({backlog.reservations / backlog.seconds:,.0f} rows/s, "
            f"{1000 * backlog.worker_cpu / backlog.reservations:.2f} ms of worker CPU per row)"
        )
    tally = result.run.tally
    accepted = tally.statuses[202]
    print(
        f"  beside a redis_lua crowd ({args.concurrency} at a time, each buyer once) of {args.persist_seconds:g} s "
        f"on {AMPLE:,} units:"
    )
    others = ", ".join(f"{status or 'none'} x {n:,}" for status, n in sorted(tally.statuses.items()) if status != 202)
    print(
        f"    reserved (202)                 {accepted:,} at {tally.rate:,.0f} req/s"
        + (f"; {others}" if others else "")
    )
    if tally.ran_out:
        print("    the buyers ran out before the end: raise --tokens")
    load_rate = result.rows_at_stop / tally.seconds if tally.seconds else 0.0
    print(f"    rows written during the load   {result.rows_at_stop:,} ({load_rate:,.0f} rows/s)")
    print(f"    waiting when the load stopped  {result.waiting_at_stop:,}")
    drained = result.rows - result.rows_at_stop
    # A drain of a few rows after the load says nothing of the worker's pace: it kept up.
    kept_up = result.drain_seconds is not None and result.drain_seconds < 0.5
    if result.drain_seconds is None:
        print(f"    not all persisted within {DRAIN_TIMEOUT} s ({drained:,} rows written meanwhile)")
    else:
        rate = "the worker kept up" if kept_up else f"{drained / result.drain_seconds:,.0f} rows/s"
        print(f"    all persisted after the load   {result.drain_seconds:.2f} s ({drained:,} rows, {rate})")
    print(f"    one row per reservation        {'yes' if result.rows == accepted else f'no: {result.rows:,} rows'}")
    cpu = f"during the load {1000 * result.worker_cpu_load / max(result.rows_at_stop, 1):.2f}"
    if drained and not kept_up:
        cpu += f"; after it {1000 * result.worker_cpu_drain / drained:.2f}"
    print(f"    worker CPU ms per row          {cpu}")
    if result.tasks:
        print(f"    drain tasks run                {result.tasks:,} ({result.rows / result.tasks:,.1f} rows each)")
    print(
        f"    server CPU ms per request      {result.run.ms_per_request('server'):.2f} (without a worker: {alone:.2f})"
    )
    print()
