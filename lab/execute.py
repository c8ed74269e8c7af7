"""Carrying out a lab run (the ``lab`` queue's task): Locust at this same server, one
strategy after another, each on fresh data, with live figures written to the run's lanes.

The work is ``loadtests``' own (``one_run``: fresh product, Locust, a wait until the
server is quiet, the audit, the verdict), so the lab and ``make loadtest`` judge a run
by the same rules; the lab only adds the live figures and keeps the result. Starting,
cancelling and publishing a run are ``lab.services``', which sends the task
(``lab.tasks``) that calls in here: services -> tasks -> execute, never back.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from argparse import Namespace
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from accounts.services import users_retire, users_with_tokens_create
from core.namespace import key_prefix
from harness.machine import describe, git_commit
from harness.server import Server
from loadtests.locust_process import locust_now
from loadtests.one_run import one_run
from loadtests.products import PRODUCTS, Sample, Target
from loadtests.report import write_outputs
from loadtests.scenarios import ALL, HOLD_SECONDS
from loadtests.staff import staff_token_create
from loadtests.verdict import Result, counted_breaks
from locking import Lock
from locking.integration import locks_redis

from .errors import LabBusy
from .lifecycle import settings_caveat
from .models import LabLane, LabRun
from .proofs import run_proves

# The longest lane a run may have (the form's bound on its seconds).
LONGEST_LANE_SECONDS = 60
# What a pool of a lab run holds besides its stock (the load-test runner's defaults).
PRIZES = 5
DRAWS_PER_USER = 3
LOCK_NAME = "lab:run"
# How often the live figures of a lane are written (each write is one UPDATE).
LIVE_EVERY_SECONDS = 1.0
# How often a running lane looks for its run's cancel (each look is one SELECT).
CANCEL_POLL_SECONDS = 0.5
# Past this, a queued or running run is taken for abandoned (its worker died): each lane
# gets its duration plus this much for fresh data, the wait until quiet and the audit.
LANE_OVERHEAD_SECONDS = 60
# How long a redis_lua lane waits, once its crowd stopped, for the worker's other process to
# persist every reservation (within the lane's overhead above); what still waits then
# breaks the lane.
DRAIN_TIMEOUT_SECONDS = 30
# A run's lanes and its seconds of load in all: every strategy a registry may hold (room
# for ten) at the longest duration, or twice as many lanes (one row and buckets) at a third
# of it, so that a bucketed run stays within minutes too (``services.lab_run_create``).
MOST_LANES = 20
MOST_LOAD_SECONDS = 10 * LONGEST_LANE_SECONDS
# The longest run: its load and each lane's overhead.
LONGEST_RUN_SECONDS = MOST_LOAD_SECONDS + MOST_LANES * LANE_OVERHEAD_SECONDS
# The run's crowd's tokens, for Locust, in plain text while the run lasts.
TOKENS_FILE = "tokens.txt"


def lab_dir(run: LabRun) -> Path:
    """Where a run's outputs go: matrix files, report.html, Locust's reports."""
    return Path(settings.VAR_DIR) / "lab" / run.folder


def run_time_allowed(run: LabRun) -> timedelta:
    """How long ``run`` may take: each lane its duration and overhead, and one overhead more.
    Past it the run is taken for abandoned, and its users' tokens no longer work."""
    return timedelta(seconds=run.lanes.count() * (run.duration + LANE_OVERHEAD_SECONDS) + LANE_OVERHEAD_SECONDS)


def run_users_retire(run: LabRun) -> None:
    """The run's crowd and member of staff (``lab<id>-``) are this run's only: retired (not
    deleted, their orders are the run's evidence), their tokens revoked and their file
    deleted, whatever became of the retirement."""
    try:
        users_retire(username_prefix=f"lab{run.pk}-")
    finally:
        (lab_dir(run) / TOKENS_FILE).unlink(missing_ok=True)


def run_end(*, run: LabRun, status: str, error: str) -> None:
    """End an active run: its lanes that never started are marked not run."""
    ended = LabRun.objects.filter(pk=run.pk, status__in=[LabRun.Status.QUEUED, LabRun.Status.RUNNING]).update(
        status=status, error=error, finished_at=timezone.now()
    )
    run.refresh_from_db()
    if ended:
        run.lanes.filter(status=LabLane.Status.WAITING).update(status=LabLane.Status.NOT_RUN)


def lab_run_fail(*, run: LabRun, error: str) -> None:
    """The run failed: so did the lane under way; those that never started are not run. Its
    users are retired, whether its task ends it or the task's worker died."""
    run_end(run=run, status=LabRun.Status.FAILED, error=error)
    run.lanes.filter(status=LabLane.Status.RUNNING).update(status=LabLane.Status.FAILED)
    run_users_retire(run)


class _Cancelled(Exception):
    pass


def _still_running(run: LabRun) -> bool:
    return LabRun.objects.filter(pk=run.pk, status=LabRun.Status.RUNNING).exists()


def _stop_if_cancelled(run: LabRun) -> None:
    if not _still_running(run):
        raise _Cancelled()


def lab_run_execute(*, run_id: int) -> LabRun:
    """Carry out a queued run, one lane after another; a run that is ended (a task delivered
    twice) is left alone, and one found running is failed: its worker died.

    Raises ``LabBusy`` when another run holds the lab's lock (the task retries). A lane
    that fails fails the run, with the error kept on it; the run's outputs (matrix
    files, ``report.html``) are written under ``lab_dir``.
    """
    # Held, and renewed, for as long as the longest run may take.
    lock = Lock(
        locks_redis(),
        LOCK_NAME,
        key_prefix=key_prefix(),
        lease=settings.LOCK_LEASE_SECONDS,
        blocking=False,
        max_hold=LONGEST_RUN_SECONDS,
    )
    if lock.acquire() is None:
        raise LabBusy()
    try:
        run = LabRun.objects.get(pk=run_id)
        if run.status == LabRun.Status.RUNNING:
            # This task holds the lab's lock, so no other carries the run out: it is the
            # redelivery of a task whose worker died mid-run (killed, out of memory, past its
            # time limit), which left the run running and its users able to buy.
            lab_run_fail(run=run, error="Orphaned: its worker stopped before the run ended.")
            return run
        if run.status != LabRun.Status.QUEUED:
            return run
        # Started only if still queued: staff may have cancelled it since it was read, and a
        # cancelled run must stay cancelled rather than run.
        started = LabRun.objects.filter(pk=run.pk, status=LabRun.Status.QUEUED).update(
            status=LabRun.Status.RUNNING,
            started_at=timezone.now(),
            commit=git_commit(),
            machine=describe(commit=False),
            caveat=settings_caveat(ALL[run.scenario]),
        )
        run.refresh_from_db()
        if not started:
            return run
        try:
            try:
                _run_lanes(run, lock)
            except _Cancelled:
                pass
            run_users_retire(run)
        except Exception:  # noqa: BLE001  (kept on the run for the page; the worker goes on)
            # Saved before anything else runs: what follows may fail as well (on the lane's
            # dead connection, say), and must not take the place of the lane's own error.
            error = traceback.format_exc(limit=5)
            _connection_renewed_if_lost()
            lab_run_fail(run=run, error=error)
        else:
            # Only a run still running becomes done: one cancelled meanwhile stays failed.
            LabRun.objects.filter(pk=run.pk, status=LabRun.Status.RUNNING).update(
                status=LabRun.Status.DONE, finished_at=timezone.now(), proves=run_proves(run)
            )
            run.refresh_from_db()
        return run
    finally:
        lock.release()


def _run_lanes(run: LabRun, lock: Lock) -> None:
    scenario = ALL[run.scenario]
    out = lab_dir(run)
    out.mkdir(parents=True, exist_ok=True)
    tokens = out / TOKENS_FILE
    # Ended by the run's retirement of its users; should that never come (its worker killed),
    # by the longest a run may take, not the run's own allowance, which a few slow lanes may
    # pass while the crowd still needs them.
    ttl = timedelta(seconds=LONGEST_RUN_SECONDS)
    pairs = users_with_tokens_create(count=run.crowd, prefix=f"lab{run.pk}", ttl=ttl)
    tokens.write_text("".join(f"{username} {token}\n" for username, token in pairs))
    staff_token = staff_token_create(prefix=f"lab{run.pk}-staff", ttl=ttl)
    # Retired once the lanes end (``lab_run_execute``), or by ``lab_run_fail``.
    _run_lanes_with(run, scenario, out, tokens, staff_token, lock)


def _connection_renewed_if_lost() -> None:
    """A lane may have lost the database connection (a restart, a network cut): the dead one
    is closed for the next query to open another. Within a transaction (a caller's), the
    connection is the caller's to handle."""
    if not connection.in_atomic_block:
        close_old_connections()


def _run_lanes_with(run: LabRun, scenario, out: Path, tokens: Path, staff_token: str, lock: Lock) -> None:
    args = Namespace(
        stock=run.stock,
        prizes=PRIZES,
        draws_per_user=DRAWS_PER_USER,
        no_prize_weight=0,
        out=out,
        users=run.users,
        spawn_rate=run.users,
        duration=run.duration,
        locust_processes=1,
        hammer_buyers=3,
        race_window_ms=run.race_window_ms,
        server_processes=run.server_processes,
        drain_timeout=DRAIN_TIMEOUT_SECONDS,
        # A lifecycle scenario's items hold each take as long as the run recorded.
        hold_seconds=run.hold_seconds or HOLD_SECONDS,
    )
    server = Server(host=run.target_url)
    results = []
    for lane in run.lanes.all():
        # The lab's lock lost (its key expired unrenewed, Redis restarted): another run may
        # have started, and two at once would load the server together. LockLost fails the run.
        lock.check()
        _stop_if_cancelled(run)
        # Only a lane still waiting starts: one a cancel marked not run stays so.
        if not LabLane.objects.filter(pk=lane.pk, status=LabLane.Status.WAITING).update(status=LabLane.Status.RUNNING):
            continue
        lane.status = LabLane.Status.RUNNING
        with stopped_on_cancel(run, lock_lost=lock.lost) as stop:
            result = one_run(
                args, scenario, lane.strategy, server, tokens, staff_token, lane.key,
                observe=LiveLane(lane, run_dir=out / lane.key), stop=stop, buckets=lane.buckets,
            )  # fmt: skip
        results.append(result)
        lane_finish(lane=lane, result=result, cancelled=stop.is_set())
    lock.check()
    _stop_if_cancelled(run)
    meta = {
        "lab run": run.pk,
        "when": run.started_at.isoformat(timespec="seconds"),
        "users": run.users,
        "buyers": run.crowd,
        "duration_s": run.duration,
        "stock": run.stock,
        "buckets": run.buckets,
        "server_processes": run.server_processes,
        "race_window_ms": run.race_window_ms,
        "database": run.database,
        "machine": run.machine,
    }
    if run.caveat:
        meta["settings"] = run.caveat
    # The report is served at /lab/runs/<id>/report, each Locust report beside it.
    write_outputs(out, results, meta, locust_href=lambda result: f"locust/{result.label}")


def lane_finish(*, lane: LabLane, result, cancelled: bool = False) -> None:
    """The lane's final figures and verdict, from the audited result; ``cancelled`` when its
    crowd was stopped before its time (the figures are up to then)."""
    # What only the live writes know (its item, its seconds), kept rather than saved over.
    lane.refresh_from_db(fields=["item_id", "elapsed"])
    figures = dataclasses.asdict(result)
    lane.taken_series = figures.pop("taken_series")
    lane.supply_series = figures.pop("supply_series")
    lane.bucket_series = figures.pop("bucket_series")
    figures.pop("stock_series")
    lane.figures = figures
    lane.breaks = counted_breaks(result)
    lane.supplied = result.supplied or 0
    lane.stock_left = result.stock_left or 0
    lane.taken = (result.orders if result.orders is not None else result.awarded) or 0
    lane.rps = result.rps
    lane.p95_ms = result.p95_ms
    lane.verdict = result.verdict
    lane.expected_to_break = result.expected_to_break
    lane.ok = result.ok
    lane.status = LabLane.Status.CANCELLED if cancelled else LabLane.Status.DONE
    lane.save()


@contextmanager
def stopped_on_cancel(run: LabRun, *, lock_lost: threading.Event | None = None) -> Iterator[threading.Event]:
    """An event set once the run is no longer running (staff cancelled it), or once
    ``lock_lost`` is (the lab's lock, which keeps another run off the server), which stops
    the lane's crowd. Looked for on a thread and a connection of its own, so that neither
    the live figures' sampling (slow or failing while a dependency is down) nor anything
    else of the lane's can put the cancel off."""
    stop, lane_over = threading.Event(), threading.Event()

    def watch() -> None:
        try:
            while not lane_over.wait(CANCEL_POLL_SECONDS):
                if lock_lost is not None and lock_lost.is_set():
                    stop.set()
                    return
                try:
                    if not _still_running(run):
                        stop.set()
                        return
                except DatabaseError:
                    # A connection the database lost stays dead: the next look opens another.
                    close_old_connections()
        finally:
            connection.close()

    watcher = threading.Thread(target=watch, name=f"lab-run-{run.pk}-cancel", daemon=True)
    watcher.start()
    try:
        yield stop
    finally:
        lane_over.set()
        watcher.join()


class LiveLane:
    """The observer of one lane: writes the stock, the units left in each bucket, the counted
    breaks (from the product's audit, the same rules as the verdict) and Locust's pace to the
    lane about once a second, for the page that polls it."""

    def __init__(self, lane: LabLane, *, run_dir: Path) -> None:
        self.lane = lane
        self.locust_prefix = run_dir / "locust"
        self.last_write = 0.0
        self.taken: list[tuple[float, int]] = []
        self.supply: list[tuple[float, int]] = []
        self.buckets: list[tuple[float, list[int]]] = []

    def __call__(self, target: Target, elapsed: float, sample: Sample) -> None:
        at = round(elapsed, 2)
        self.taken.append((at, sample.taken))
        self.supply.append((at, sample.supplied))
        self.buckets.append((at, list(sample.buckets)))
        now = time.monotonic()
        if now - self.last_write < LIVE_EVERY_SECONDS:
            return
        self.last_write = now
        product = PRODUCTS[self.lane.run.product]
        # The audit's figures, counted by the verdict's own rule.
        audited = Result(scenario=self.lane.run.scenario, strategy=self.lane.strategy, product=product.name)
        breaks = counted_breaks(dataclasses.replace(audited, **product.audit(target).figures))
        rps, p95 = locust_now(self.locust_prefix)
        LabLane.objects.filter(pk=self.lane.pk).update(
            item_id=target.pk,
            elapsed=at,
            supplied=sample.supplied,
            taken=sample.taken,
            stock_left=sample.stock,
            breaks=breaks,
            rps=rps,
            p95_ms=p95,
            taken_series=self.taken,
            supply_series=self.supply,
            bucket_series=self.buckets,
        )
