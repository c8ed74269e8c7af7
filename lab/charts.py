"""The lab's charts: the load test report's own SVG drawing, sized for a card that stays
readable at phone width."""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe

from loadtests.report import line_chart
from loadtests.verdict import TAKEN

from .models import LabLane

BROKEN = "#b3261e"
HOLDING = "#1b7a3a"
SUPPLY = "#555555"


def lane_chart(lane: LabLane, *, duration: int) -> SafeString:
    """Orders (or prizes awarded) over time against the dashed supply line; red once above it."""
    taken = [(t, n) for t, n in lane.taken_series]
    supply = [(t, n) for t, n in lane.supply_series]
    if not taken:
        return mark_safe("")
    name = TAKEN[lane.run.product]
    over = lane.broken or any(n > s for (_, n), (_, s) in zip(taken, supply, strict=False))
    svg = line_chart(
        f"{name} over time, against the supply",
        {name: taken},
        {"supply": supply},
        width=360,
        height=200,
        legend=0,
        colours={name: BROKEN if over else HOLDING, "supply": SUPPLY},
        t_min=duration,
        marker=(duration, "crowd stops"),
    )
    # Built from numbers and fixed labels only (line_chart escapes its text).
    return mark_safe(svg)  # noqa: S308
