"""The lab's charts: the load test report's own SVG drawing, sized for a card that stays
readable at phone width; the per-bucket chart says what it shows in words too."""

from __future__ import annotations

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from loadtests.report import bucket_lines, line_chart
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


def bucket_chart(lane: LabLane, *, duration: int) -> SafeString:
    """Units left in each bucket over time, a line per bucket, with the same in words below
    it (what each bucket started with, when they emptied, what was left): a bucket holding
    units while the others are empty stands out as a line above 0."""
    series = [(t, list(units)) for t, units in lane.bucket_series]
    if not series:
        return mark_safe("")
    where = "per bucket" if lane.buckets > 1 else "in its one row"
    svg = line_chart(
        f"Units left {where} over time",
        bucket_lines(series),
        width=360,
        height=200,
        legend=0,
        t_min=duration,
        marker=(duration, "crowd stops"),
    )
    # Built from numbers and fixed labels only (line_chart escapes its text).
    return format_html(
        '<figure class="bucket-chart" data-testid="bucket-chart">{}<figcaption>{}</figcaption></figure>',
        mark_safe(svg),  # noqa: S308
        bucket_summary(series),
    )


def bucket_summary(series: list[tuple[float, list[int]]]) -> str:
    """The per-bucket chart in words: "8 buckets started with 100 units (12 to 13 each); all
    were empty by 2.4 s (the first at 1.9 s)", or the units still left at the last sample, by
    bucket."""
    _, start = series[0]
    at, end = series[-1]
    count = len(end)
    what = "One row" if count == 1 else f"{count} buckets"
    low, high = min(start, default=0), max(start, default=0)
    each = "" if count == 1 else (f" ({low} each)" if low == high else f" ({low} to {high} each)")
    opening = f"{what} started with {sum(start):,} units{each}"
    left = [(bucket, units) for bucket, units in enumerate(end) if units]
    if not left:
        # When each bucket that had units first read empty.
        emptied = [
            next((t for t, units in series if bucket < len(units) and units[bucket] == 0), 0.0)
            for bucket in range(count)
            if bucket < len(start) and start[bucket]
        ] or [0.0]
        first, last = min(emptied), max(emptied)
        when = f"{last:.1f} s" if first == last else f"{last:.1f} s (the first at {first:.1f} s)"
        return f"{opening}; {'it was' if count == 1 else 'all were'} empty by {when}."
    held = "; ".join(f"bucket {bucket}: {units}" for bucket, units in left[:8]) + ("; ..." if len(left) > 8 else "")
    return f"{opening}; {sum(end):,} left at {at:.1f} s ({held})."
