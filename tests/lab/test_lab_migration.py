"""The migrations of runs kept before them: buckets (``lab.0004``: the run and its lanes keep
their figures and read as sold from one row), holds (``lab.0005``) and proofs' keys
(``lab.0007``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from inventory.strategies import strategy_names
from lab.models import LabRun
from lab.proofs import proof_of_strategies
from lab.selectors import lab_run_proof
from lab.services import DEFAULTS

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("lab", "0003_run_caveat")]
# The strategies expected to break on a server of two processes (``StockStrategy.breaks``).
UNSAFE = ("none", "local")


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


def test_runs_kept_before_proofs_were_keyed_get_their_keys_and_the_proof_stays_theirs():
    apps = migrate([("lab", "0006_run_proof_indexes")])
    Run, Lane = apps.get_model("lab", "LabRun"), apps.get_model("lab", "LabLane")
    kept, runs = {}, (("complete", "done", None), ("partial", "done", "redlock"), ("failed", "failed", None))
    for name, status, unfinished in runs:
        run = kept[name] = Run.objects.create(
            product="voucher", scenario="crowd", status=status, target_url="http://127.0.0.1:8000",
            folder=f"before-proves-{name}", finished_at=timezone.now() - timedelta(minutes=len(kept)), **DEFAULTS,
        )  # fmt: skip
        for position, strategy in enumerate(strategy_names(), start=1):
            status = "not_run" if strategy == unfinished else "done"
            unsafe = strategy in UNSAFE
            Lane.objects.create(
                run=run, position=position, strategy=strategy, status=status, expected_to_break=unsafe, ok=True
            )
    migrate()
    proves = dict(LabRun.objects.filter(folder__startswith="before-proves-").values_list("folder", "proves"))
    every_strategy = proof_of_strategies(product="voucher", lifecycle=False, strategies=strategy_names(), **DEFAULTS)
    assert proves == {"before-proves-complete": every_strategy, "before-proves-partial": "", "before-proves-failed": ""}
    assert lab_run_proof(product="voucher").pk == kept["complete"].pk


def test_a_run_keyed_before_whose_unsafe_lane_did_not_reproduce_the_race_stands_for_no_proof():
    """Keyed by ``lab.0007`` when every lane ran to its end was enough; ``lab.0008`` asks the
    unsafe lanes to have broken too, and the proof goes back to the run before it."""
    apps = migrate([("lab", "0007_run_proves")])
    Run, Lane = apps.get_model("lab", "LabRun"), apps.get_model("lab", "LabLane")
    every_strategy = proof_of_strategies(product="voucher", lifecycle=False, strategies=strategy_names(), **DEFAULTS)
    kept = {}
    for name, reproduced in (("earlier", True), ("later", False)):
        run = kept[name] = Run.objects.create(
            product="voucher", scenario="crowd", status="done", target_url="http://127.0.0.1:8000",
            folder=f"keyed-{name}", finished_at=timezone.now() - timedelta(minutes=2 - len(kept)),
            proves=every_strategy, **DEFAULTS,
        )  # fmt: skip
        for position, strategy in enumerate(strategy_names(), start=1):
            unsafe = strategy in UNSAFE
            ok = reproduced or not unsafe
            Lane.objects.create(
                run=run, position=position, strategy=strategy, status="done", expected_to_break=unsafe, ok=ok
            )
    migrate()
    proves = dict(LabRun.objects.filter(folder__startswith="keyed-").values_list("folder", "proves"))
    assert proves == {"keyed-earlier": every_strategy, "keyed-later": ""}
    assert lab_run_proof(product="voucher").pk == kept["earlier"].pk
