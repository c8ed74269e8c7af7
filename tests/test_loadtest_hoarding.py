"""The hoarding scenario (``loadtests/locustfiles/hoarding.py``) end to end, both ways: the
runner's gunicorn server, its Celery worker and beat, hoarders that buy, cancel and buy again,
and one honest buyer. With the item's cap on abandoned holds and its cooldown off the
hoarders keep the stock and the honest buyer hears only sold_out; with the defaults on the
honest buyer gets a unit. Five seconds each, six hoarders and three units held 2 s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.load

ROOT = Path(__file__).resolve().parent.parent


def hoarding(tmp_path: Path, *abandon: str) -> dict:
    out = tmp_path / ("uncapped" if abandon else "capped")
    command = [
        sys.executable, "-m", "loadtests.run", "--runs", "hoarding:db_atomic", "--no-baseline", "--users", "7",
        "--spawn-rate", "7", "--buyers", "7", "--stock", "3", "--duration", "5", "--hold-seconds", "2",
        "--server-processes", "2", "--out", str(out), *abandon,
    ]  # fmt: skip
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    print(completed.stdout[-4000:])
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-3000:]
    (row,) = json.loads((out / "matrix.json").read_text())["results"]
    return row


def test_hoarders_keep_the_stock_without_the_cap_and_the_honest_buyer_gets_a_unit_with_it(tmp_path):
    hoarded = hoarding(tmp_path, "--abandon-limit", "0", "--abandon-cooldown-seconds", "0")
    assert (hoarded["ok"], hoarded["abandon_capped"]) == (True, False), hoarded
    assert hoarded["honest_sold_out"] >= 4 and hoarded["verdict"].startswith("hoarded as expected"), hoarded
    # Abandoning freely, the six hoarders abandoned more than one hold each, which the cooldown
    # stops within a run.
    assert hoarded["released"] > 6, hoarded

    fair = hoarding(tmp_path)
    assert (fair["ok"], fair["verdict"], fair["honest_bought"], fair["abandon_capped"]) == (True, "holds", True, True)
    assert fair["released"] <= 2 * 6 and fair["held_left"] == 0 and fair["failures"] == 0, fair
