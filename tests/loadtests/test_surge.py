"""The surge scenarios end to end (loadtests.run, a real gunicorn server): the same crowd at the
take at once and through a waiting room. Both sell every unit once; through the room nobody
takes without a ticket, nobody errs, those left are told it is sold out instead of waiting, and
the room admits in the order of joining (inversions under 1%)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.load

ROOT = Path(__file__).resolve().parent.parent.parent


def test_a_surge_through_a_waiting_room_sells_once_in_order_and_tells_the_rest(tmp_path):
    out = tmp_path / "surge"
    command = [
        sys.executable, "-m", "loadtests.run", "--scenario", "surge,surge-queue", "--strategies", "db_atomic",
        "--users", "60", "--spawn-rate", "60", "--buyers", "1500", "--stock", "100", "--duration", "6",
        "--admission-rate", "100", "--stop-when-sold-out", "--no-baseline", "--out", str(out),
    ]  # fmt: skip
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(completed.stdout[-4000:])
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    results = {r["scenario"]: r for r in json.loads((out / "matrix.json").read_text())["results"]}
    for scenario in ("surge", "surge-queue"):
        row = results[scenario]
        assert (row["orders"], row["oversold"], row["duplicates"], row["lost_confirmations"]) == (100, 0, 0, 0), row
    queued = results["surge-queue"]
    assert queued["failures"] == 0, queued
    assert queued["admitted"] >= 100 and queued["told_sold_out"] > 0, queued
    assert queued["inversions_percent"] < 1.0, queued
    assert results["surge"]["admitted"] is None
