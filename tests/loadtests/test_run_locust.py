"""Locust stopped before its time (a lab run cancelled): it ends within seconds, whether it
was still starting or already running, and its stats are read without an error; also when
the runner was started in the background by a shell, which ignores Ctrl-C (SIGINT) and
hands that on to its children. One that never exits is killed past its time."""

from __future__ import annotations

import csv
import os
import signal
import threading
import time
from argparse import Namespace

import pytest

from loadtests.locust_process import LOCUST_GRACE_SECONDS, NO_REQUESTS, run_locust
from tests.waiting import wait_until

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


def once_it_counted_requests(prefix, stop: threading.Event) -> None:
    """Sets ``stop`` once Locust's stats history (a line a second) counts a request."""
    give_up = time.monotonic() + 30
    while not counted_requests(prefix) and time.monotonic() < give_up:
        time.sleep(0.1)
    stop.set()


def counted_requests(prefix) -> int:
    try:
        with open(f"{prefix}_stats_history.csv") as history:
            rows = [row for row in csv.DictReader(history) if row.get("Name") == "Aggregated"]
    except OSError:
        return 0
    return int(rows[-1]["Total Request Count"]) if rows else 0


@pytest.mark.parametrize("when", ["still-starting", "running"])
def test_a_stopped_locust_ends_within_seconds_and_its_stats_are_read(locustfile, tmp_path, when, ctrl_c):
    stop = threading.Event()
    if when == "still-starting":
        stop.set()
    else:
        threading.Thread(target=once_it_counted_requests, args=(tmp_path / "locust", stop), daemon=True).start()
    row, seconds = stopped_run(locustfile, tmp_path, stop)
    # Ended by the Ctrl-C it heard, not killed once the grace after the stop ran out (a
    # Ctrl-C sent before a Locust started with it ignored listens is lost).
    assert seconds < LOCUST_GRACE_SECONDS
    assert row is NO_REQUESTS or int(row["Request Count"]) >= 0
    if when == "running":
        assert int(row["Request Count"]) > 0 and row["Name"] == "take", row


# A Locust that runs its time, writes its reports and then never exits: a thread of its
# locustfile that Python waits for at the exit.
HANGING_LOCUSTFILE = (
    LOCUSTFILE
    + """
import threading, time

threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()
"""
)


def test_a_locust_that_never_exits_is_killed_past_its_time(tmp_path, monkeypatch):
    monkeypatch.setattr("loadtests.locust_process.LOCUST_GRACE_SECONDS", 2)
    locustfile = tmp_path / "locustfile.py"
    locustfile.write_text(HANGING_LOCUSTFILE)
    args = Namespace(spawn_rate=2, duration=2, locust_processes=1)
    started = time.monotonic()
    row = run_locust(args, locustfile, "http://127.0.0.1:9", tmp_path / "locust", dict(os.environ), 2)
    assert time.monotonic() - started < 30  # not for ever
    # Killed past its time: its stats as it wrote them, or none if it was slower than that to start.
    assert row is NO_REQUESTS or row["Name"] in ("take", "Aggregated"), row


class TimeLimitOnceRunning:
    """A stop that raises once ``processes`` processes run the locustfile (with ``--processes``
    its workers forked), as Celery's soft time limit raises in the thread that waits on Locust."""

    def __init__(self, locustfile, processes: int) -> None:
        self.locustfile, self.processes = locustfile, processes

    def is_set(self) -> bool:
        if len(locusts_of(self.locustfile)) >= self.processes:
            raise TimeoutError("the task's time limit")
        return False


def locusts_of(locustfile) -> list[int]:
    """The pids of the processes running ``locustfile``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if str(locustfile).encode() in cmdline.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("processes", [1, 2])
def test_a_wait_ended_by_an_error_kills_its_locust_and_its_workers(locustfile, tmp_path, processes):
    args = Namespace(spawn_rate=2, duration=DURATION, locust_processes=processes)
    # With workers, the first process and one per worker.
    running = TimeLimitOnceRunning(locustfile, 1 if processes == 1 else 1 + processes)
    with pytest.raises(TimeoutError):
        run_locust(args, locustfile, "http://127.0.0.1:9", tmp_path / "locust", dict(os.environ), 2, running)
    # Not left running against the next run's server: a worker killed with the first was
    # once left to run its users for a minute.
    wait_until(lambda: locusts_of(locustfile) == [], "every process of the Locust ends", timeout=5)
