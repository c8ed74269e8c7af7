"""Finished lab runs written straight to the database, with every figure a real run keeps,
for the tests of the pages that show them (a real run takes a minute a strategy)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from django.utils import timezone

from inventory.buckets import units_spread
from inventory.strategies import STRATEGIES, strategy_names
from lab.models import LabLane, LabRun
from lab.proofs import run_proves
from lab.services import DEFAULTS
from loadtests.sales import sales_per_second
from loadtests.scenarios import ALL, HOLD_SECONDS, LIFECYCLE
from loadtests.verdict import Result, counted_breaks, judge

OVERSOLD = 89
RETURNED_TWICE = 3


def fake_result(
    strategy: str, *, product="voucher", scenario="crowd", stock=100, duration=10, buckets=1, stranded=0
) -> Result:
    """A run of ``strategy`` as the verdict would judge it: the unsafe ones sell ``OVERSOLD``
    beyond the stock, the others exactly the stock (less ``stranded``, left in bucket 0 while
    the crowd was told sold out); sampled four times a second, ending a second and a half
    after the crowd, as the wait until quiet does."""
    info = STRATEGIES[strategy]
    taken = stock + (OVERSOLD if info.breaks else 0) - stranded
    times = [i / 4 for i in range(int((duration + 1.5) * 4))]
    series = [(t, min(taken, int(t * taken / 4))) for t in times]
    # Each bucket sells alike; what is stranded stays in bucket 0.
    spread = [(t, units_spread(max(0, stock - stranded - n), buckets)) for t, n in series]
    bucket_series = [(t, [units[0] + stranded, *units[1:]]) for t, units in spread]
    result = Result(
        scenario=scenario, strategy=strategy, product=product, requests=2000, confirmed=taken, supplied=stock,
        stock_left=stranded, lost_confirmations=0, rps=812.3, p50_ms=21, p95_ms=88, p99_ms=140, cpu_ms_per_request=None,
        locust_report=f"{strategy}/locust.html", taken_series=series, supply_series=[(t, stock) for t in times],
        stock_series=[(t, max(0, stock - n)) for t, n in series], buckets=buckets, bucket_series=bucket_series,
        stranded=stranded, sales_per_second=sales_per_second(series),
    )  # fmt: skip
    if product == "voucher":
        result.orders, result.oversold, result.duplicates = taken, max(0, taken - stock), 0
    else:
        result.awarded, result.over_awarded, result.users_over_limit = taken, max(0, taken - stock), 0
    if scenario in LIFECYCLE:
        # Drained: the unsafe strategies returned units twice, and paid or claimed some released.
        races = RETURNED_TWICE if info.breaks else 0
        result.settled, result.released, result.resold, result.held_left = stock - 10, 30, 20, 0
        result.returned_twice, result.settled_and_released, result.unsettled_200s = races, races, 0
        result.returns_unsold, result.holds_drain_s = 0, 2.5
        if product == "voucher":
            result.charges, result.refunds, result.payments_off = stock, races, 0
    if scenario == "surge-queue":
        # Through the waiting room: the stock's buyers let in (and two whose take found it gone),
        # the rest told it was sold out, in order.
        result.admitted, result.told_sold_out, result.inversions_percent, result.longest_wait_s = (
            stock + 2,
            1500,
            0.0,
            3.1,
        )
    verdict = judge(result, breaks=info.breaks, server_processes=2)
    return dataclasses.replace(result, **dataclasses.asdict(verdict))


def fake_run(
    user, *, product="voucher", scenario="crowd", status="done", strategies=None, lane_status=None, item_id=None,
    finished_ago=timedelta(0), buckets=1, stranded=0, **size,
) -> LabRun:  # fmt: skip
    """A run of ``strategies`` (all by default) at ``size`` (the default size by default);
    ``lane_status`` sets some lanes' status (a ``not_run`` lane has no figures). With
    ``buckets`` above 1, each strategy on one row and on buckets, the latter leaving
    ``stranded`` units."""
    size = DEFAULTS | size
    now = timezone.now() - finished_ago
    run = LabRun.objects.create(
        product=product, scenario=scenario, target_url="http://127.0.0.1:8000", status=status, server_processes=2,
        database="mysql", commit="abc123", machine="2 cores", race_window_ms=20, created_by=user,
        folder=f"fake-{now:%H%M%S%f}-{product}", started_at=now - timedelta(minutes=2),
        finished_at=None if status in ("queued", "running") else now,
        error=f"Cancelled by {user.get_username()}." if status == "cancelled" else "", buckets=buckets,
        hold_seconds=HOLD_SECONDS if ALL[scenario].lifecycle else 0, **size,
    )  # fmt: skip
    shapes = [1] if buckets == 1 else [1, buckets]
    lanes = [(name, shape) for name in strategies or strategy_names() for shape in shapes]
    for position, (name, shape) in enumerate(lanes, start=1):
        lane_state = (lane_status or {}).get(name, "done")
        if lane_state in ("not_run", "waiting"):
            LabLane.objects.create(run=run, position=position, strategy=name, status=lane_state, buckets=shape)
            continue
        result = fake_result(
            name, product=product, scenario=scenario, stock=size["stock"], duration=size["duration"], buckets=shape,
            stranded=stranded if shape > 1 else 0,
        )  # fmt: skip
        figures = {k: v for k, v in dataclasses.asdict(result).items() if not k.endswith("_series")}
        LabLane.objects.create(
            run=run, position=position, strategy=name, buckets=shape, bucket_series=result.bucket_series,
            status=lane_state, item_id=item_id, elapsed=size["duration"],
            supplied=result.supplied, taken=figures["orders"] if product == "voucher" else figures["awarded"],
            breaks=counted_breaks(result), rps=result.rps, p95_ms=result.p95_ms, taken_series=result.taken_series,
            supply_series=result.supply_series, verdict=result.verdict, expected_to_break=result.expected_to_break,
            ok=result.ok, figures=figures,
        )  # fmt: skip
    if status == "done":
        # As the run's task writes it when the run finishes.
        run.proves = run_proves(run)
        run.save(update_fields=["proves"])
    return run
