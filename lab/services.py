"""Starting a lab run and carrying it out: Locust at this same server, one strategy after
another, each on fresh data, with live figures written to the run's lanes.

The work is ``loadtests``' own (``one_run``: fresh product, Locust, a wait until the
server is quiet, the audit, the verdict), so the lab and ``make loadtest`` judge a run
by the same rules; the lab only adds the live figures and keeps the result.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
import traceback
from argparse import Namespace
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from accounts.crowd import crowd_retire
from accounts.services import users_with_tokens_create
from benchmarks.machine import describe, git_commit
from core.errors import InvalidInput
from core.namespace import key_prefix
from inventory.stock import strategy_names
from loadtests.one_run import locust_now, one_run
from loadtests.products import PRODUCTS, Sample, Target
from loadtests.report import write_outputs
from loadtests.scenarios import SCENARIOS
from loadtests.server import Server
from loadtests.staff import staff_token_create
from loadtests.verdict import Result, counted_breaks
from locking import Lock
from locking.integration import lock_client

from .errors import LabBusy, LabNotConfigured
from .models import LabLane, LabRun

# The bounds of a run's parameters: (smallest, largest). A run takes up to one duration
# per strategy, so the whole lab stays within minutes.
BOUNDS = {
    "stock": (1, 10_000),
    "crowd": (1, 5_000),
    "users": (1, 200),
    "duration": (1, 60),
}
# A run's size unless staff choose another (the form's initial values): the proof page
# shows a complete run of every strategy at this size, or a run staff published.
DEFAULTS = {"stock": 100, "crowd": 2000, "users": 40, "duration": 10}
# What a pool of a lab run holds besides its stock (the load-test runner's defaults).
PRIZES = 5
DRAWS_PER_USER = 3
LOCK_NAME = "lab:run"
# How often the live figures of a lane are written (each write is one UPDATE).
LIVE_EVERY_SECONDS = 1.0
# Past this, a queued or running run is taken for abandoned (its worker died): each lane
# gets its duration plus this much for fresh data, the wait until quiet and the audit.
LANE_OVERHEAD_SECONDS = 60
# How long a redis_lua lane waits, once its crowd stopped, for the worker's other process to
# persist every reservation (within the lane's overhead above); what still waits then
# breaks the lane.
DRAIN_TIMEOUT_SECONDS = 30
# The longest run: every strategy a registry may hold (room for ten) at the longest duration.
LONGEST_RUN_SECONDS = 10 * (BOUNDS["duration"][1] + LANE_OVERHEAD_SECONDS)


def lab_dir(run: LabRun) -> Path:
    """Where a run's outputs go: matrix files, report.html, Locust's reports."""
    return Path(settings.VAR_DIR) / "lab" / run.folder


def _bounded(name: str, value: int) -> int:
    low, high = BOUNDS[name]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be a whole number from {low:,} to {high:,}.")
    return value


def _abandon_stale_runs(now) -> None:
    """Mark failed the active runs that have outlived every lane's time: their worker died."""
    for run in LabRun.objects.filter(status__in=[LabRun.Status.QUEUED, LabRun.Status.RUNNING]):
        lanes = run.lanes.count()
        allowed = timedelta(seconds=lanes * (run.duration + LANE_OVERHEAD_SECONDS) + LANE_OVERHEAD_SECONDS)
        if now - run.created_at > allowed:
            lab_run_fail(run=run, error="Abandoned: no Celery worker finished it in time.")


@transaction.atomic
def lab_run_create(
    *,
    user,
    product: str,
    scenario: str,
    strategies: list[str] | None,
    stock: int,
    crowd: int,
    users: int,
    duration: int,
) -> LabRun:
    """A queued run with one lane per strategy, and its Celery task sent once the run is
    committed. ``strategies`` None or empty means all of the registry's, in its order.

    The crowd goes to ``settings.LAB_TARGET_URL`` and nowhere else: never to an address
    the request names (its Host), which would send the crowd's tokens, and the staff
    token of a restock run, wherever the caller points them.

    Raises ``InvalidInput`` for a product, scenario or strategy that does not exist, a
    scenario of the other product, or a number out of ``BOUNDS``; ``LabBusy`` while
    another run is queued or running; ``LabNotConfigured`` without ``LAB_TARGET_URL``.
    """
    from .tasks import lab_run_task  # the task module imports this one

    if not settings.LAB_TARGET_URL:
        raise LabNotConfigured()
    if product not in PRODUCTS:
        raise InvalidInput(f"Unknown product {product!r}: choose one of {', '.join(PRODUCTS)}.")
    if scenario not in SCENARIOS:
        raise InvalidInput(f"Unknown scenario {scenario!r}: choose one of {', '.join(SCENARIOS)}.")
    if SCENARIOS[scenario].product != product:
        raise InvalidInput(f"The scenario {scenario!r} runs against the other product.")
    known = strategy_names()
    chosen = [name for name in known if name in set(strategies)] if strategies else known
    unknown = sorted(set(strategies or []) - set(known))
    if unknown:
        raise InvalidInput(f"Unknown strategies: {', '.join(unknown)}.")
    now = timezone.now()
    _abandon_stale_runs(now)
    # Refuses a second run in the usual case. Two clicks at the same instant may still
    # both queue one (READ COMMITTED takes no lock on rows that do not exist yet): what
    # guarantees one run at a time is the Celery task's Redis lock, and the second run
    # then waits for the first.
    if LabRun.objects.filter(status__in=[LabRun.Status.QUEUED, LabRun.Status.RUNNING]).exists():
        raise LabBusy()
    run = LabRun.objects.create(
        product=product,
        scenario=scenario,
        stock=_bounded("stock", stock),
        crowd=_bounded("crowd", crowd),
        users=_bounded("users", users),
        duration=_bounded("duration", duration),
        target_url=settings.LAB_TARGET_URL.rstrip("/"),
        race_window_ms=settings.RACE_WINDOW_MS,
        server_processes=settings.LAB_SERVER_PROCESSES,
        database=connection.vendor,
        folder=f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(4)}",
        created_by=user,
    )
    LabLane.objects.bulk_create(
        LabLane(run=run, position=position, strategy=name) for position, name in enumerate(chosen, start=1)
    )
    transaction.on_commit(lambda: lab_run_task.delay(run.pk))
    return run


def _run_end(*, run: LabRun, status: str, error: str) -> None:
    """End an active run: its lanes that never started are marked not run."""
    ended = LabRun.objects.filter(pk=run.pk, status__in=[LabRun.Status.QUEUED, LabRun.Status.RUNNING]).update(
        status=status, error=error, finished_at=timezone.now()
    )
    run.refresh_from_db()
    if ended:
        run.lanes.filter(status=LabLane.Status.WAITING).update(status=LabLane.Status.NOT_RUN)


def lab_run_fail(*, run: LabRun, error: str) -> None:
    """The run failed: so did the lane under way; those that never started are not run."""
    _run_end(run=run, status=LabRun.Status.FAILED, error=error)
    run.lanes.filter(status=LabLane.Status.RUNNING).update(status=LabLane.Status.FAILED)


def lab_run_cancel(*, run: LabRun, user) -> None:
    """Cancel a queued or running run: marked cancelled at once, its lanes still waiting
    not run. The lane under way stops its crowd within about a second (``LiveLane``), is
    audited on what it did until then and marked cancelled; the task then stops. A run
    no longer active is left alone."""
    _run_end(run=run, status=LabRun.Status.CANCELLED, error=f"Cancelled by {user.get_username()}.")


def lab_run_publish(*, run: LabRun, user) -> LabRun:
    """Put a finished run on /proof/, whatever its size or strategies (by default the proof
    shows only a complete run of every strategy at the default size). Raises
    ``InvalidInput`` for a run that is not done."""
    if run.status != LabRun.Status.DONE:
        raise InvalidInput("Only a finished run can go on the proof page.")
    run.published_at = timezone.now()
    run.save(update_fields=["published_at"])
    return run


class _Cancelled(Exception):
    pass


def _still_running(run: LabRun) -> bool:
    return LabRun.objects.filter(pk=run.pk, status=LabRun.Status.RUNNING).exists()


def _stop_if_cancelled(run: LabRun) -> None:
    if not _still_running(run):
        raise _Cancelled()


def lab_run_execute(*, run_id: int) -> LabRun:
    """Carry out a queued run, one lane after another; a run that is not queued (a task
    delivered twice) is left alone.

    Raises ``LabBusy`` when another run holds the lab's lock (the task retries). A lane
    that fails fails the run, with the error kept on it; the run's outputs (matrix
    files, ``report.html``) are written under ``lab_dir``.
    """
    # Held, and renewed, for as long as the longest run may take.
    lock = Lock(
        lock_client(),
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
        if run.status != LabRun.Status.QUEUED:
            return run
        run.status = LabRun.Status.RUNNING
        run.started_at = timezone.now()
        run.commit = git_commit()
        run.machine = describe(commit=False)
        run.save(update_fields=["status", "started_at", "commit", "machine"])
        try:
            _run_lanes(run)
        except _Cancelled:
            run.refresh_from_db()
        except Exception:  # noqa: BLE001  (kept on the run for the page; the worker goes on)
            lab_run_fail(run=run, error=traceback.format_exc(limit=5))
        else:
            # Only a run still running becomes done: one cancelled meanwhile stays failed.
            LabRun.objects.filter(pk=run.pk, status=LabRun.Status.RUNNING).update(
                status=LabRun.Status.DONE, finished_at=timezone.now()
            )
            run.refresh_from_db()
        return run
    finally:
        lock.release()


def _run_lanes(run: LabRun) -> None:
    scenario = SCENARIOS[run.scenario]
    out = lab_dir(run)
    out.mkdir(parents=True, exist_ok=True)
    tokens = out / "tokens.txt"
    pairs = users_with_tokens_create(count=run.crowd, prefix=f"lab{run.pk}")
    tokens.write_text("".join(f"{username} {token}\n" for username, token in pairs))
    staff_token = staff_token_create(prefix=f"lab{run.pk}-staff")
    try:
        _run_lanes_with(run, scenario, out, tokens, staff_token)
    finally:
        # The crowd and its member of staff are this run's only: retired (not deleted,
        # their orders are the run's evidence), their tokens revoked.
        crowd_retire(username_prefix=f"lab{run.pk}-")
        tokens.unlink(missing_ok=True)


def _run_lanes_with(run: LabRun, scenario, out: Path, tokens: Path, staff_token: str) -> None:
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
    )
    server = Server(host=run.target_url)
    results = []
    for lane in run.lanes.all():
        _stop_if_cancelled(run)
        lane.status = LabLane.Status.RUNNING
        lane.save(update_fields=["status"])
        live = LiveLane(lane, run_dir=out / lane.strategy)
        result = one_run(
            args, scenario, lane.strategy, server, tokens, staff_token, lane.strategy, observe=live, stop=live.stop
        )
        results.append(result)
        lane_finish(lane=lane, result=result, cancelled=live.stop.is_set())
    _stop_if_cancelled(run)
    meta = {
        "lab run": run.pk,
        "when": run.started_at.isoformat(timespec="seconds"),
        "users": run.users,
        "buyers": run.crowd,
        "duration_s": run.duration,
        "stock": run.stock,
        "server_processes": run.server_processes,
        "race_window_ms": run.race_window_ms,
        "database": run.database,
        "machine": run.machine,
    }
    # The report is served at /lab/runs/<id>/report, each Locust report beside it.
    write_outputs(out, results, meta, locust_href=lambda result: f"locust/{result.strategy}")


def lane_finish(*, lane: LabLane, result, cancelled: bool = False) -> None:
    """The lane's final figures and verdict, from the audited result; ``cancelled`` when its
    crowd was stopped before its time (the figures are up to then)."""
    figures = dataclasses.asdict(result)
    lane.taken_series = figures.pop("taken_series")
    lane.supply_series = figures.pop("supply_series")
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


class LiveLane:
    """The observer of one lane: writes the stock, the counted breaks (from the product's
    audit, the same rules as the verdict) and Locust's pace to the lane about once a
    second, for the page that polls it; sets ``stop`` once the run is no longer running
    (staff cancelled it), which stops the lane's crowd."""

    def __init__(self, lane: LabLane, *, run_dir: Path) -> None:
        self.lane = lane
        self.stop = threading.Event()
        self.locust_prefix = run_dir / "locust"
        self.last_write = 0.0
        self.taken: list[tuple[float, int]] = []
        self.supply: list[tuple[float, int]] = []

    def __call__(self, target: Target, elapsed: float, sample: Sample) -> None:
        at = round(elapsed, 2)
        self.taken.append((at, sample.taken))
        self.supply.append((at, sample.supplied))
        now = time.monotonic()
        if now - self.last_write < LIVE_EVERY_SECONDS:
            return
        self.last_write = now
        if not _still_running(self.lane.run):
            self.stop.set()
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
        )
