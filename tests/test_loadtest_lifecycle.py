"""The lifecycle's load tests end to end: the runner's lifecycle scenarios against a real
gunicorn server, with the Celery worker and beat it starts releasing holds at their
deadline and posting the payment provider's callbacks (late, twice, lost and sent again).

Each scenario runs once under ``none``, which must break one of the lifecycle's races
(a unit returned twice, a record paid or claimed and released, a 200 whose record is not
paid or claimed, a payment off balance), and once under a safe strategy, a different one
per scenario, which must hold every invariant once its holds have drained. Items hold
their units for one second, and each run lasts three, so that the ten runs share one
server and take about a minute and a half. The crowd is large enough to last the three
seconds at redis_lua's pace (about 1,000 requests a second here), so that buyers are
still coming when the abandoned units return.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.load

ROOT = Path(__file__).resolve().parent.parent
SAFE = {
    "abandon": "redis_lua",
    "pay-race": "db_atomic",
    "cancel-storm": "redis_lock",
    "draw-abandon": "db_pessimistic",
    "claim-race": "db_optimistic",
}
RACES = ("returned_twice", "settled_and_released", "unsettled_200s", "payments_off")


def test_each_lifecycle_scenario_catches_none_and_clears_a_safe_strategy(tmp_path):
    out = tmp_path / "loadtest"
    runs = ",".join(f"{scenario}:{strategy}" for scenario, safe in SAFE.items() for strategy in ("none", safe))
    command = [
        sys.executable, "-m", "loadtests.run", "--runs", runs, "--no-baseline", "--users", "20",
        "--spawn-rate", "20", "--buyers", "6000", "--stock", "40", "--duration", "3", "--hold-seconds", "1",
        "--out", str(out),
    ]  # fmt: skip
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(completed.stdout[-8000:])
    assert completed.returncode == 0, completed.stdout[-8000:] + completed.stderr[-4000:]
    results = {(r["scenario"], r["strategy"]): r for r in json.loads((out / "matrix.json").read_text())["results"]}
    assert set(results) == {pair for scenario, safe in SAFE.items() for pair in ((scenario, "none"), (scenario, safe))}

    for scenario, safe in SAFE.items():
        naive = results[scenario, "none"]
        assert naive["ok"] and naive["expected_to_break"], naive["verdict"]
        assert any(naive[race] for race in RACES), naive
        row = results[scenario, safe]
        assert (row["ok"], row["verdict"]) == (True, "holds"), row
        assert not any(row[race] for race in RACES) and row["returns_unsold"] == 0, row
        assert row["held_left"] == 0 and row["holds_drain_s"] is not None and row["failures"] == 0, row
        assert row["conserved"] and row["lost_confirmations"] == 0, row
        # Every take, pay, cancel and claim it answered is borne out by the records it names.
        assert row["history_violations"] == 0, row["history_rules"]

    # Units came back and the crowd still coming took them.
    for scenario in ("abandon", "draw-abandon", "cancel-storm"):
        row = results[scenario, SAFE[scenario]]
        assert row["released"] > 0 and row["resold"] > 0, row
    # Every charge ended as one paid order or one refund; pays answered 200 and claims alike.
    race = results["pay-race", SAFE["pay-race"]]
    assert race["charges"] == race["settled"] + race["refunds"] > 0, race
    answers = [line.split() for f in (out / "pay-race-db_atomic" / "outcomes").glob("outcomes-*.txt")
               for line in f.read_text().splitlines()]  # fmt: skip
    assert any(words[:2] == ["pay", "paid"] for words in answers)
    claims = results["claim-race", SAFE["claim-race"]]
    assert claims["settled"] > 0 and claims["released"] > 0 and claims["charges"] is None, claims
    matrix = (out / "matrix.md").read_text()
    assert "| returned twice | settled+released | 200s unsettled |" in matrix
    assert "| history |" in matrix
    history = [line for f in (out / "pay-race-db_atomic" / "outcomes").glob("history-*.jsonl")
               for line in f.read_text().splitlines()]  # fmt: skip
    assert {json.loads(line)["action"] for line in history} >= {"take", "pay"}
