"""Reads of lab runs: the one going on, the past ones, the proof of each product."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404

from inventory.strategies import strategy_names
from loadtests.scenarios import ALL

from .models import LabLane, LabRun
from .services import DEFAULTS

_LANES = Prefetch("lanes", queryset=LabLane.objects.order_by("position"))


def lab_run_list(*, limit: int = 20) -> QuerySet[LabRun]:
    return LabRun.objects.prefetch_related(_LANES).order_by("-created_at", "-id")[:limit]


def lab_run_get(*, run_id: int) -> LabRun:
    return get_object_or_404(LabRun.objects.prefetch_related(_LANES), pk=run_id)


def lab_run_active() -> LabRun | None:
    return (
        LabRun.objects.prefetch_related(_LANES)
        .filter(status__in=[LabRun.Status.QUEUED, LabRun.Status.RUNNING])
        .order_by("-created_at")
        .first()
    )


def lab_run_proof(*, product: str, lifecycle: bool = False) -> LabRun | None:
    """What ``/proof/`` shows of ``product``: the latest finished run that staff published, or
    that ran every strategy of the registry, each to its end, at the default size
    (``services.DEFAULTS``), whichever came last. A short run of two strategies proves
    little, and does not replace the proof unless staff say so. With ``lifecycle``, of the
    lifecycle's scenarios (``LIFECYCLE``), else of the others: each has a proof of its own,
    as a run of one proves nothing of the other."""
    scenarios = [name for name, scenario in ALL.items() if scenario.lifecycle == lifecycle]
    done = LabRun.objects.prefetch_related(_LANES).filter(
        product=product, status=LabRun.Status.DONE, scenario__in=scenarios
    )
    published = done.filter(published_at__isnull=False).order_by("-published_at", "-id").first()
    complete = None
    for run in done.filter(**DEFAULTS).order_by("-finished_at", "-id")[:20]:
        lanes = list(run.lanes.all())
        if [lane.strategy for lane in lanes] == strategy_names() and all(
            lane.status == LabLane.Status.DONE for lane in lanes
        ):
            complete = run
            break
    candidates = [(run.published_at, run) for run in [published] if run] + [
        (run.finished_at, run) for run in [complete] if run
    ]
    return max(candidates, key=lambda pair: pair[0])[1] if candidates else None
