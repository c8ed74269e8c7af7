"""Reads of lab runs: the one going on, the past ones, the proof of each product."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404

from inventory.strategies import strategy_names
from loadtests.scenarios import ALL, SURGES

from .models import LabLane, LabRun
from .proofs import proof_of_buckets, proof_of_strategies, proof_of_surge
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
    scenarios = [name for name, scenario in ALL.items() if scenario.lifecycle == lifecycle and name not in SURGES]
    done = LabRun.objects.filter(product=product, status=LabRun.Status.DONE, scenario__in=scenarios, buckets=1)
    every_strategy = proof_of_strategies(product=product, lifecycle=lifecycle, strategies=strategy_names(), **DEFAULTS)
    return _latest(done, proves=every_strategy)


def lab_run_proof_bucketed(*, product: str) -> LabRun | None:
    """What ``/proof/`` shows of ``product`` split into buckets: the latest finished bucketed
    run (each strategy on one row and on buckets, side by side), of any scenario, size and
    strategies, each lane run to its end, or a later one staff published. It never replaces
    the proof of one row (``lab_run_proof``), which shows every strategy."""
    done = LabRun.objects.filter(product=product, status=LabRun.Status.DONE, buckets__gt=1)
    return _latest(done, proves=proof_of_buckets(product))


def lab_run_proof_surge(*, scenario: str) -> LabRun | None:
    """What ``/proof/`` shows of a surge (``loadtests.scenarios.SURGES``: at the take at once,
    and through the waiting room), each beside the other: the latest finished run of
    ``scenario``, of any size and strategies, each lane run to its end, or a later one staff
    published. It never replaces the crowd's proof."""
    done = LabRun.objects.filter(scenario=scenario, status=LabRun.Status.DONE, buckets=1)
    return _latest(done, proves=proof_of_surge(scenario))


def _latest(done: QuerySet[LabRun], *, proves: str) -> LabRun | None:
    """Of finished runs ``done``: the one staff published last, or the latest run that
    ``proves`` (``lab.proofs``), whichever came last. Each read on an index of its own
    (``lab_run_published``, ``lab_run_proves``), a row each however many runs there were, and
    only the chosen run's lanes loaded."""
    published = (
        done.filter(published_at__isnull=False).order_by("-published_at", "-id").values_list("published_at", "pk")
    )
    latest = LabRun.objects.filter(proves=proves).order_by("-finished_at", "-id").values_list("finished_at", "pk")
    candidates = [chosen for chosen in (published.first(), latest.first()) if chosen]
    if not candidates:
        return None
    _, pk = max(candidates)
    return LabRun.objects.prefetch_related(_LANES).get(pk=pk)
