"""A lab run's life as staff see it: started (queued, its task sent once committed),
cancelled, published on /proof/. Carrying it out is ``lab.execute``'s, in the task that
``lab.tasks`` holds: services -> tasks -> execute, never back."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.errors import InvalidInput
from inventory.records import MAX_BUCKETS
from inventory.strategies import strategy_names
from loadtests.products import PRODUCTS
from loadtests.scenarios import ALL, HOLD_SECONDS

from .errors import LabBusy, LabNotConfigured
from .execute import (
    LONGEST_LANE_SECONDS,
    MOST_LANES,
    MOST_LOAD_SECONDS,
    lab_run_fail,
    run_end,
    run_time_allowed,
)
from .models import LabLane, LabRun
from .tasks import lab_run_task

# The bounds of a run's parameters: (smallest, largest). A run takes up to one duration
# per strategy, so the whole lab stays within minutes.
BOUNDS = {
    "stock": (1, 10_000),
    "crowd": (1, 5_000),
    "users": (1, 200),
    "duration": (1, LONGEST_LANE_SECONDS),
    "buckets": (1, MAX_BUCKETS),
}
# A run's size unless staff choose another (the form's initial values): the proof page
# shows a complete run of every strategy at this size, or a run staff published.
DEFAULTS = {"stock": 100, "crowd": 2000, "users": 40, "duration": 10}


def _bounded(name: str, value: int) -> int:
    low, high = BOUNDS[name]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be a whole number from {low:,} to {high:,}.")
    return value


def _lanes_planned(strategies: list[str], buckets: int, duration: int) -> list[tuple[str, int]]:
    """(strategy, buckets) of each lane: one per strategy, or with ``buckets`` above 1 two, one
    row then the buckets, side by side. Raises ``InvalidInput`` for a run longer than the lab
    allows (``MOST_LANES``, ``MOST_LOAD_SECONDS`` of load in all)."""
    shapes = [1] if buckets == 1 else [1, buckets]
    lanes = [(strategy, shape) for strategy in strategies for shape in shapes]
    load = len(lanes) * duration
    if len(lanes) > MOST_LANES or load > MOST_LOAD_SECONDS:
        each = f", each on one row and on {buckets} buckets" if buckets > 1 else ""
        raise InvalidInput(
            f"{len(lanes)} lanes ({len(strategies)} strategies{each}) of {duration} s each would load the server "
            f"{load:,} s; a run may have {MOST_LANES} lanes and {MOST_LOAD_SECONDS:,} s of load: choose fewer "
            "strategies or fewer seconds."
        )
    return lanes


def _abandon_stale_runs(now) -> None:
    """Mark failed the active runs that have outlived every lane's time: their worker died.
    A running run's time counts from its start: the time it waited in the queue (behind
    another run, or for a worker) is none of its lanes'."""
    for run in LabRun.objects.filter(status__in=[LabRun.Status.QUEUED, LabRun.Status.RUNNING]):
        since = run.started_at if run.status == LabRun.Status.RUNNING and run.started_at else run.created_at
        if now - since > run_time_allowed(run):
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
    buckets: int = 1,
) -> LabRun:
    """A queued run with one lane per strategy, and its Celery task sent once the run is
    committed. ``strategies`` None or empty means all of the registry's, in its order.
    ``buckets`` above 1 gives each strategy two lanes: its voucher on one row, then split
    into that many buckets (``inventory.buckets``).

    The crowd goes to ``settings.LAB_TARGET_URL`` and nowhere else: never to an address
    the request names (its Host), which would send the crowd's tokens, and the staff
    token of a restock run, wherever the caller points them.

    Raises ``InvalidInput`` for a product, scenario or strategy that does not exist, a
    scenario of the other product, a number out of ``BOUNDS``, buckets for a product
    sold from one (a pool, for now) or a run too long (``_lanes_planned``); ``LabBusy`` while
    another run is queued or running; ``LabNotConfigured`` without ``LAB_TARGET_URL``.
    """
    if not settings.LAB_TARGET_URL:
        raise LabNotConfigured()
    if product not in PRODUCTS:
        raise InvalidInput(f"Unknown product {product!r}: choose one of {', '.join(PRODUCTS)}.")
    if scenario not in ALL:
        raise InvalidInput(f"Unknown scenario {scenario!r}: choose one of {', '.join(ALL)}.")
    if ALL[scenario].product != product:
        raise InvalidInput(f"The scenario {scenario!r} runs against the other product.")
    known = strategy_names()
    chosen = [name for name in known if name in set(strategies)] if strategies else known
    unknown = sorted(set(strategies or []) - set(known))
    if unknown:
        raise InvalidInput(f"Unknown strategies: {', '.join(unknown)}.")
    buckets = _bounded("buckets", buckets)
    lanes = _lanes_planned(chosen, buckets, _bounded("duration", duration))
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
        duration=duration,
        buckets=buckets,
        target_url=settings.LAB_TARGET_URL.rstrip("/"),
        race_window_ms=settings.RACE_WINDOW_MS,
        server_processes=settings.LAB_SERVER_PROCESSES,
        # The lab's lifecycle runs hold each take as ``make loadtest`` does.
        hold_seconds=HOLD_SECONDS if ALL[scenario].lifecycle else 0,
        database=connection.vendor,
        folder=f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(4)}",
        created_by=user,
    )
    LabLane.objects.bulk_create(
        LabLane(run=run, position=position, strategy=name, buckets=shape)
        for position, (name, shape) in enumerate(lanes, start=1)
    )
    transaction.on_commit(lambda: lab_run_task.delay(run.pk))
    return run


def lab_run_cancel(*, run: LabRun, user) -> None:
    """Cancel a queued or running run: marked cancelled at once, its lanes still waiting
    not run. The lane under way stops its crowd within about a second (``stopped_on_cancel``), is
    audited on what it did until then and marked cancelled; the task then stops. A run
    no longer active is left alone."""
    run_end(run=run, status=LabRun.Status.CANCELLED, error=f"Cancelled by {user.get_username()}.")


def lab_run_publish(*, run: LabRun, user) -> LabRun:
    """Put a finished run on /proof/, whatever its size or strategies (by default the proof
    shows only a complete run of every strategy at the default size). Raises
    ``InvalidInput`` for a run that is not done."""
    if run.status != LabRun.Status.DONE:
        raise InvalidInput("Only a finished run can go on the proof page.")
    run.published_at = timezone.now()
    run.save(update_fields=["published_at"])
    return run
