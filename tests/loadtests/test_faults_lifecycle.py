"""The fault runner's lifecycle faults end to end, short: each once, on items whose takes are
held, against a real gunicorn server, Celery worker and beat, and a Redis of the runner's
own (``loadtests.faults.expiry``, ``loadtests.faults.callbacks``).

One runner for the four runs, so that the server starts once; each test reads its own row.
Every run must drain (nothing held), hold the matrix's invariants and the lifecycle's
(available + held + settled == supply, no unit returned twice, no record both settled and
released, every payment confirmation one paid order or one refund), and show what its
fault is there for. ``make faults`` runs every strategy each fault concerns, on both
products.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fault

ROOT = Path(__file__).resolve().parent.parent.parent

RUNS = (
    # The database's release, as every guarded strategy but redis_lua makes it.
    ("celery-kill-expiry", "db_atomic"),
    # A release that also returns its units to Redis, under the group's lock.
    ("expiry-lost", "redis_lua"),
    # The state rebuilt from the database while units are held.
    ("redis-restart-held", "redis_lua"),
    ("late-callback", "db_atomic"),
)


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("lifecycle-faults")
    # The name of its database, on the shared server: no fault here restarts MariaDB.
    database = os.environ.get("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale") + "_lifecycle"
    command = [
        sys.executable, "-m", "loadtests.faults", "--runs", ",".join(f"{f}:{s}" for f, s in RUNS),
        "--scenario", "crowd", "--duration", "10", "--fault-at", "2", "--down", "1",
        "--users", "20", "--spawn-rate", "20", "--buyers", "8000", "--server-processes", "2",
        # The beat sweeps every 2 s (the settings' 5): a lost expiry is released sooner; a
        # dead worker's group lock lasts 3 s.
        "--sweep-seconds", "2", "--lock-lease", "3", "--claim-idle-ms", "3000",
        "--database-url", database, "--out", str(out),
    ]  # fmt: skip
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    print(completed.stdout[-6000:])
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-4000:]
    found = {r["fault"]: r for r in json.loads((out / "faults.json").read_text())["rows"]}
    assert {(r["fault"], r["strategy"]) for r in found.values()} == set(RUNS)
    return found


def drained_whole(row: dict) -> dict:
    """The run's lifecycle once drained, after the checks every run must pass."""
    assert row["ok"] and (row["oversold"], row["duplicates"], row["lost_confirmations"]) == (0, 0, 0), row
    life = row["lifecycle"]
    assert life["held"] == 0 and life["returned_twice"] == 0 and life["settled_and_released"] == 0, life
    assert life["available"] + life["held"] + life["settled"] == life["supplied"], life
    # The crowd sold out and bought again what came back.
    assert life["released"] > 0 and row["answers"].get("409", 0) > 0, row
    return life


def test_a_worker_killed_inside_a_release_leaves_every_hold_to_be_released_once(rows):
    row = rows["celery-kill-expiry"]
    drained_whole(row)
    assert "killed inside a release (rolled back)" in row["verdict"], row["verdict"]


def test_expiry_tasks_lost_with_the_broker_are_released_by_the_sweep(rows):
    row = rows["expiry-lost"]
    life = drained_whole(row)
    assert life["redis_state"] and not any(life["redis_drift"].values()), life
    assert "broker messages deleted" in row["verdict"], row["verdict"]


def test_units_held_across_a_redis_restart_stay_taken_and_come_back_once(rows):
    row = rows["redis-restart-held"]
    life = drained_whole(row)
    # Units held stayed taken in the rebuilt state and came back once each at expiry.
    assert life["redis_state"] and not any(life["redis_drift"].values()), life
    assert row["answers"].get("503", 0) > 0 and '"redis": "error' in row["health"], row


def test_confirmations_after_the_hold_are_refunded_and_sell_nothing(rows):
    row = rows["late-callback"]
    life = drained_whole(row)
    payments = life["payments"]
    assert payments["ok"] and payments["paid"] == 0 and payments["refunded"] == payments["confirmations"] > 0, life
    assert "refunded as expired" in row["verdict"], row["verdict"]
