"""The fault runner end to end, short: every fault once, mid-sale, against a real gunicorn
server, Celery worker and a Redis server of the runner's own, each run audited.

It must exit 0: a gunicorn worker SIGKILLed, the Redis restarted empty and the Celery
worker SIGKILLed, the sale held every invariant, answered only documented statuses (503
``unavailable`` with Retry-After while Redis was down) and sold again on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_every_fault_once_holds_the_invariants_and_recovers(tmp_path):
    out = tmp_path / "faults"
    # A database of its own beside the suite's (the runner creates it and migrates).
    database = os.environ.get("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale") + "_faults"
    command = [
        sys.executable, "-m", "loadtests.faults", "--faults", "all", "--scenario", "crowd",
        "--strategies", "redis_lock,redis_lua", "--duration", "13", "--fault-at", "3", "--down", "1.5",
        "--users", "20", "--spawn-rate", "20", "--buyers", "5000", "--stock", "4000", "--server-processes", "2",
        "--claim-idle-ms", "3000",
        "--database-url", database, "--out", str(out),
    ]  # fmt: skip
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(completed.stdout[-6000:])
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-4000:]

    rows = {(r["fault"], r["strategy"]): r for r in json.loads((out / "faults.json").read_text())["rows"]}
    assert set(rows) == {
        ("worker-kill", "redis_lock"),
        ("worker-kill", "redis_lua"),
        ("redis-restart", "redis_lock"),
        ("redis-restart", "redis_lua"),
        ("celery-kill", "redis_lua"),
    }
    for row in rows.values():
        assert row["ok"] and (row["oversold"], row["duplicates"], row["lost_confirmations"]) == (0, 0, 0), row
        assert row["recover_s"] is not None, row
    for strategy in ("redis_lock", "redis_lua"):
        down = rows["redis-restart", strategy]
        # Answered 503 while Redis was down, and /healthz said it was Redis.
        assert down["answers"].get("503", 0) > 0, down
        assert down["health"].startswith("503") and '"redis": "error' in down["health"], down
    assert "| fault | scenario | strategy |" in (out / "faults.md").read_text()
