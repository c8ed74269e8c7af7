"""The migration that gives lab runs and lanes their buckets (``lab.0004``), run on a run kept
before it: the run and its lanes keep their figures and read as sold from one row."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from lab.models import LabRun

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("lab", "0003_run_caveat")]


def migrate(targets=None):
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def test_a_run_kept_before_buckets_keeps_its_lanes_and_reads_as_one_row():
    apps = migrate(BEFORE)
    Run, Lane = apps.get_model("lab", "LabRun"), apps.get_model("lab", "LabLane")
    run = Run.objects.create(
        product="voucher", scenario="crowd", stock=100, crowd=2000, users=40, duration=10, status="done",
        target_url="http://127.0.0.1:8000", folder="before-buckets",
    )  # fmt: skip
    series = [[0.0, 0], [1.0, 100]]
    Lane.objects.create(run=run, position=1, strategy="db_atomic", taken=100, taken_series=series, verdict="holds")
    migrate()
    kept = LabRun.objects.get(pk=run.pk)
    lane = kept.lanes.get()
    assert (kept.buckets, kept.bucketed, kept.side_by_side) == (1, False, [])
    assert (lane.buckets, lane.key, lane.shape, lane.bucket_series) == (1, "db_atomic", "", [])
    assert (lane.taken, lane.taken_series, lane.verdict, lane.stranded) == (100, series, "holds", None)


def test_a_lifecycle_run_kept_before_holds_were_recorded_gets_the_hold_it_ran_with():
    apps = migrate([("lab", "0004_run_and_lane_buckets")])
    Run = apps.get_model("lab", "LabRun")
    for scenario in ("pay-race", "crowd"):
        Run.objects.create(
            product="voucher", scenario=scenario, stock=100, crowd=2000, users=40, duration=10, status="done",
            target_url="http://127.0.0.1:8000", folder=f"before-holds-{scenario}",
        )  # fmt: skip
    migrate()
    held = dict(LabRun.objects.filter(folder__startswith="before-holds-").values_list("scenario", "hold_seconds"))
    assert held == {"pay-race": 2, "crowd": 0}
