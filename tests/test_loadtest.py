"""The load tests end to end: the runner's short matrix against a real gunicorn server,
and Locust's web UI with worker processes against ``make run``.

The runner starts its own server (several worker processes), runs Locust per
scenario and strategy, and audits. It must exit 0: the safe strategies held and
the naive ones were caught breaking an invariant, for the flash sale and the prize
draw alike; ``redis_lua``'s 202s were each written as one record by the Celery worker
the runner started, and its Redis state agrees with the database. This is the CI's
short matrix.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.load

ROOT = Path(__file__).resolve().parent.parent


def test_short_matrix_catches_the_naive_strategies_and_clears_the_safe_ones(tmp_path):
    out = tmp_path / "loadtest"
    # A stock of 200 (40 per prize) runs out early even on a busy machine, so that the
    # naive strategies' over-awarding shows within the 10 s of each run.
    command = [
        sys.executable, "-m", "loadtests.run", "--scenario", "crowd,draw-crowd",
        "--strategies", "none,local,db_atomic,redis_lock,redis_lua", "--users", "40", "--spawn-rate", "40",
        "--buyers", "6000", "--stock", "200", "--duration", "10", "--stop-when-sold-out", "--out", str(out),
    ]  # fmt: skip
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(completed.stdout[-6000:])
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-4000:]
    results = {(r["scenario"], r["strategy"]): r for r in json.loads((out / "matrix.json").read_text())["results"]}

    for naive in ("none", "local"):
        row = results["crowd", naive]
        assert row["oversold"] > 0 or row["duplicates"] > 0, row
        row = results["draw-crowd", naive]
        assert row["over_awarded"] > 0 or row["users_over_limit"] > 0, row
    for safe in ("db_atomic", "redis_lock", "redis_lua"):
        row = results["crowd", safe]
        assert (row["oversold"], row["duplicates"], row["lost_confirmations"]) == (0, 0, 0), row
        assert row["orders"] == row["supplied"] - row["stock_left"]
        row = results["draw-crowd", safe]
        assert (row["over_awarded"], row["users_over_limit"], row["lost_confirmations"]) == (0, 0, 0), row
        assert row["conserved"] and row["stock_not_negative"], row
        assert row["awarded"] == row["supplied"] - row["stock_left"], row
        assert row["awarded"] > 0 and row["failures"] == 0, row
    for scenario in ("crowd", "draw-crowd"):
        row = results[scenario, "redis_lua"]
        # Every purchase or draw it accepted was answered 202, and counted once written.
        answers = [line.split() for f in (out / f"{scenario}-redis_lua" / "outcomes").glob("*.txt")
                   for line in f.read_text().splitlines()]  # fmt: skip
        assert row["accepted"] == sum(1 for words in answers if words[-1] == "pending") == row["confirmed"] > 0, row
        assert row["drain_s"] is not None and row["unpersisted"] == 0 and row["pending_at_end"] >= 0, row
        assert row["redis_state"] and not any(row["redis_drift"].values()), row
        assert (row["ok"], row["verdict"]) == (True, "holds"), row
        other = results[scenario, "db_atomic"]
        assert (other["accepted"], other["pending_at_end"], other["drain_s"]) == (None, None, None), other
    for name in (
        "matrix.csv",
        "report.html",
        "crowd-none/locust.html",
        "crowd-none/outcomes",
        "draw-crowd-none/outcomes",
    ):
        assert (out / name).exists(), name
    assert "Awarded over time, against the supply" in (out / "report.html").read_text()


def _wait_for(url: str, *, timeout: float, data: bytes | None = None) -> bytes:
    give_up = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, data=data, timeout=3) as response:
                return response.read()
        except OSError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.3)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def test_the_locust_web_ui_with_two_worker_processes_drives_make_run(tmp_path):
    """docs/loadtests.md's recipe: ``make run``, tokens from ``issue_tokens``, and Locust's web UI
    with ``--processes 2``, swarmed through the UI's own HTTP API."""
    import MySQLdb
    from django.conf import settings

    from locking.testing import free_port

    # Named after the run's own database: checkouts that share the MariaDB server each drop
    # and create theirs.
    database = f"{settings.DATABASES['default']['NAME']}_ui"[:64]
    connection = MySQLdb.connect(host="127.0.0.1", user="root", passwd="")
    connection.cursor().execute(f"DROP DATABASE IF EXISTS `{database}`")
    connection.cursor().execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
    connection.close()
    port, web_port = free_port(), free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DATABASE_URL": f"mysql://root:@127.0.0.1:3306/{database}",
        "REDIS_URL": "redis://127.0.0.1:6379/11",
        "PORT": str(port),
    }
    # As make run leaves them: its namespace derived from its own database.
    env.pop("LOCK_REDIS_URLS", None)
    env.pop("INSTANCE_NAMESPACE", None)
    server = subprocess.Popen(
        [sys.executable, "scripts/serve.py"], cwd=ROOT, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    locust = None
    try:
        _wait_for(f"http://127.0.0.1:{port}/healthz", timeout=120)
        tokens = tmp_path / "tokens.txt"
        subprocess.run(
            [sys.executable, "manage.py", "issue_tokens", "--count", "300", "--out", str(tokens)],
            cwd=ROOT, env=env, check=True, capture_output=True,
        )  # fmt: skip
        outcomes = tmp_path / "outcomes"
        locust = subprocess.Popen(
            [
                sys.executable, "-m", "locust", "-f", "loadtests/locustfiles/crowd.py",
                "--host", f"http://127.0.0.1:{port}", "--web-host", "127.0.0.1", "--web-port", str(web_port),
                "--processes", "2", "--loglevel", "WARNING",
            ],
            cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**env, "LOADTEST_TOKENS": str(tokens), "LOADTEST_VOUCHER": "1", "LOADTEST_WORKERS": "2",
                 "LOADTEST_OUTCOMES": str(outcomes), "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        stats_url = f"http://127.0.0.1:{web_port}/stats/requests"
        give_up = time.monotonic() + 60
        while json.loads(_wait_for(stats_url, timeout=60)).get("worker_count") != 2:
            assert time.monotonic() < give_up, "the two Locust worker processes never reported"
            time.sleep(0.3)
        form = urllib.parse.urlencode({"user_count": 10, "spawn_rate": 10, "host": f"http://127.0.0.1:{port}"})
        assert json.loads(_wait_for(f"http://127.0.0.1:{web_port}/swarm", timeout=10, data=form.encode()))["success"]
        give_up = time.monotonic() + 60
        while True:  # until the whole crowd of 300 has tried once
            answers = [line for f in outcomes.glob("*.txt") for line in f.read_text().splitlines()]
            if len(answers) >= 300:
                break
            assert time.monotonic() < give_up, f"only {len(answers)} answers in 60 s"
            time.sleep(0.5)
        report = json.loads(_wait_for(stats_url, timeout=10))
        _wait_for(f"http://127.0.0.1:{web_port}/stop", timeout=10, data=b"")
    finally:
        if locust is not None:
            _stop(locust)
        _stop(server)

    by_process = {f.name: f.read_text().split() for f in outcomes.glob("*.txt")}
    assert len(by_process) == 2, "each Locust worker process writes its own outcomes"
    codes = [line.split()[0] for f in outcomes.glob("*.txt") for line in f.read_text().splitlines()]
    assert len(codes) == 300
    # Voucher 1 of the demo has 50 units; each buyer tried once, with a token no other process used.
    assert codes.count("confirmed") == 50
    assert set(codes) == {"confirmed", "sold_out"}
    assert report["fail_ratio"] == 0
    audit = subprocess.run(
        [sys.executable, "manage.py", "audit", "--voucher", "1"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
