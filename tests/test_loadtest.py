"""The load-test runner end to end: a short matrix against a real gunicorn server.

The runner starts its own server (several worker processes), runs Locust per
strategy, and audits. It must exit 0: the safe strategies held and the naive
ones were caught overselling. This is the CI's short matrix.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_short_matrix_catches_the_naive_strategies_and_clears_the_safe_ones(tmp_path):
    out = tmp_path / "loadtest"
    command = [
        sys.executable, "-m", "loadtests.run", "--strategies", "none,local,db_atomic,redis_lock",
        "--users", "40", "--spawn-rate", "40", "--buyers", "6000", "--duration", "12", "--out", str(out),
    ]  # fmt: skip
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(completed.stdout[-4000:])
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    results = {r["strategy"]: r for r in json.loads((out / "matrix.json").read_text())["results"]}
    assert results["none"]["oversold"] > 0 or results["none"]["duplicates"] > 0
    assert results["local"]["oversold"] > 0 or results["local"]["duplicates"] > 0
    for safe in ("db_atomic", "redis_lock"):
        row = results[safe]
        assert (row["oversold"], row["duplicates"], row["lost_confirmations"]) == (0, 0, 0), row
        assert row["orders"] == row["supplied"] - row["stock_left"]
    for name in ("matrix.csv", "report.html", "crowd-none/locust.html", "crowd-none/outcomes"):
        assert (out / name).exists(), name
