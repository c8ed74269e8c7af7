"""``make explore``: the model-based tests (tests/model/) for as long as asked, with fresh random
seeds round after round, printing after each round the runs made and how often each rule ran,
and stopping at the first failure with its shrunk story (kept under var/hypothesis/, which the
next ``make test`` tries first, and under var/explore/).

    EXPLORE_MINUTES=60 make explore        # an hour (default 10 minutes)
    EXPLORE_ROUND=200 make explore         # runs per strategy per round (default 100)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "var" / "explore"
MACHINES = "tests/model/test_machines.py"


def main() -> int:
    minutes = float(os.environ.get("EXPLORE_MINUTES", "10"))
    per_round = int(os.environ.get("EXPLORE_ROUND", "100"))
    OUT.mkdir(parents=True, exist_ok=True)
    counts_file = OUT / f"counts-{int(time.time())}.jsonl"
    deadline = time.monotonic() + minutes * 60
    totals: Counter[str] = Counter()
    rounds = 0
    print(f"exploring for {minutes:g} min, {per_round} runs per strategy per round; counts in {counts_file}")
    while time.monotonic() < deadline:
        rounds += 1
        env = {
            **os.environ,
            "HYPOTHESIS_PROFILE": "explore",
            "EXPLORE_EXAMPLES": str(per_round),
            "MODEL_COUNTS": str(counts_file),
        }
        started = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", MACHINES,
             "--hypothesis-seed", str(int.from_bytes(os.urandom(8), "big"))],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )  # fmt: skip
        totals = Counter()
        for line in counts_file.read_text().splitlines():
            totals.update(json.loads(line)["rules"])
        print(
            f"round {rounds}: {time.monotonic() - started:.0f} s; in all {totals['(runs)']:,} runs, "
            f"{sum(totals.values()) - totals['(runs)']:,} steps; "
            + ", ".join(f"{name} {count:,}" for name, count in sorted(totals.items()) if name != "(runs)"),
            flush=True,
        )
        if run.returncode != 0:
            failure = OUT / f"failure-{int(time.time())}.txt"
            failure.write_text(run.stdout + run.stderr)
            print(run.stdout[-6000:])
            print(f"FAILED: the whole output is in {failure}")
            return 1
    print(f"no failure in {rounds} rounds, {totals['(runs)']:,} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
