"""Locust stopped before its time (a lab run cancelled): it ends within seconds, whether it
was still starting or already running, and its stats are read without an error; also when
the runner was started in the background by a shell, which ignores Ctrl-C (SIGINT) and
hands that on to its children."""

from __future__ import annotations

import os
import signal
import threading
import time
from argparse import Namespace

import pytest

from loadtests.one_run import NO_REQUESTS, run_locust

LOCUSTFILE = """
from locust import HttpUser, constant, task


class Buyer(HttpUser):
    wait_time = constant(0.1)

    @task
    def take(self):
        self.client.get("/api/nothing", name="take")
"""
# Long enough that a run ending on its own would be plain: the stop must end it.
DURATION = 60


@pytest.fixture
def locustfile(tmp_path):
    path = tmp_path / "locustfile.py"
    path.write_text(LOCUSTFILE)
    return path


def stopped_run(locustfile, tmp_path, stop: threading.Event) -> tuple[dict, float]:
    args = Namespace(spawn_rate=2, duration=DURATION, locust_processes=1)
    started = time.monotonic()
    # Nothing listens on port 9 of this machine: each request fails at once.
    row = run_locust(args, locustfile, "http://127.0.0.1:9", tmp_path / "locust", dict(os.environ), 2, stop)
    return row, time.monotonic() - started


@pytest.fixture(params=["heard", "ignored"])
def ctrl_c(request):
    """SIGINT as this process hears it: as a terminal leaves it, or ignored, as in a shell's
    background job (what the process ignores, the Locust it starts inherits)."""
    if request.param == "heard":
        yield request.param
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield request.param
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("after", [0.0, 1.5], ids=["still-starting", "running"])
def test_a_stopped_locust_ends_within_seconds_and_its_stats_are_read(locustfile, tmp_path, after, ctrl_c):
    stop = threading.Event()
    threading.Timer(after, stop.set).start()
    row, seconds = stopped_run(locustfile, tmp_path, stop)
    assert seconds < DURATION / 3
    assert row is NO_REQUESTS or int(row["Request Count"]) >= 0
    if after:
        assert int(row["Request Count"]) > 0 and row["Name"] == "take", row
