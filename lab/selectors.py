"""Reads of lab runs: the one going on, the past ones, the latest proof of each product."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404

from .models import LabLane, LabRun

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


def lab_run_latest_done(*, product: str) -> LabRun | None:
    """The latest finished run of ``product``, for the public proof page."""
    return (
        LabRun.objects.prefetch_related(_LANES)
        .filter(product=product, status=LabRun.Status.DONE)
        .order_by("-finished_at", "-id")
        .first()
    )
