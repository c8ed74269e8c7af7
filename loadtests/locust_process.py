"""Locust as a process of its own: started headless, stopped before its time as Ctrl-C
would stop it, killed if it never exits, and its figures read from the files it writes
(the stats of the whole run, the history it appends to every second).

Imported once Django is set up (with the load runner)."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from argparse import Namespace
from contextlib import suppress
from pathlib import Path

from harness.server import ROOT

from .common import QUEUE, WATCH

# How often a running Locust is checked for a request to stop it.
STOP_POLL_SECONDS = 0.2
# How long past its time, or past Ctrl-C, a Locust may take to end (its stop timeout of 5 s
# and its reports) before it is killed.
LOCUST_GRACE_SECONDS = 15
# Locust, with Ctrl-C (SIGINT) heard: a process started in the background by a shell
# ignores SIGINT, and its children inherit that; Python then never raises the
# KeyboardInterrupt that stops Locust, and a crowd told to stop would run its whole time.
LOCUST_HEARING_CTRL_C = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); from locust.main import main; main()"
)
# Locust's stats row of a run that made no request.
NO_REQUESTS = {"Request Count": "0", "Failure Count": "0", "Requests/s": "0", "50%": "0", "95%": "0", "99%": "0"}


class LoadRunFailed(Exception):
    """A run could not be carried out (Locust failed, its folder was taken); nothing was judged."""


def run_locust(
    args: Namespace,
    locustfile: Path,
    host: str,
    prefix: Path,
    env: dict[str, str],
    users: int,
    stop: threading.Event | None = None,
) -> dict:
    """Run Locust headless; return the stats row of the busiest take endpoint. Once ``stop`` is
    set Locust is told to stop (as Ctrl-C would): its crowd stops, it writes its stats."""
    command = [
        sys.executable, "-c", LOCUST_HEARING_CTRL_C, "-f", str(locustfile), "--headless",
        "-u", str(users), "-r", str(args.spawn_rate), "-t", f"{args.duration}s", "--stop-timeout", "5",
        "--host", host, "--csv", str(prefix), "--html", f"{prefix}.html", "--only-summary",
        "--exit-code-on-error", "0", "--loglevel", "WARNING",
    ]  # fmt: skip
    if args.locust_processes > 1:
        command += ["--processes", str(args.locust_processes)]
    with tempfile.TemporaryFile() as errors:
        # A session of its own: with --processes its workers are forked children, which a
        # kill of the first alone left running their users against the server for a minute.
        locust = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True
        )
        stopping = stop_seen = False
        deadline = time.monotonic() + args.duration + LOCUST_GRACE_SECONDS
        try:
            while True:
                if stop is not None and not stop_seen and stop.is_set():
                    # Its grace counts from the stop, heard yet or not.
                    stop_seen = True
                    deadline = min(deadline, time.monotonic() + LOCUST_GRACE_SECONDS)
                # Looked at before the first wait too: a stop asked for before Locust started
                # is sent as soon as Locust listens.
                if stop_seen and not stopping and hears_ctrl_c(locust.pid):
                    # As Ctrl-C: Locust writes its HTML report too (not on SIGTERM).
                    locust.send_signal(signal.SIGINT)
                    stopping = True
                elif time.monotonic() > deadline:
                    # Its reports written, a Locust once waited for ever on a thread at its exit.
                    _kill(locust)
                    stopping = True
                try:
                    returncode = locust.wait(timeout=STOP_POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    pass
        except BaseException:
            # Whatever ended the wait (a task's time limit, a signal, an error of ours): its
            # crowd must not go on against the server, under the next run's measurement.
            _kill(locust)
            locust.wait()
            raise
        # A worker it forked that outlived it would go on against the server.
        _kill(locust)
        if returncode != 0 and not stopping:
            errors.seek(0)
            raise LoadRunFailed(f"Locust failed ({returncode}):\n{errors.read().decode(errors='replace')[-3000:]}")
    try:
        with open(f"{prefix}_stats.csv") as stats:
            rows = list(csv.DictReader(stats))
    except FileNotFoundError:
        if not stopping:
            raise
        # Stopped while it was still starting, before it counted anything or set up its
        # Ctrl-C: it left no stats.
        return NO_REQUESTS
    # The take's endpoint: not the total, nor the open tabs' polls (``watched.py``), nor a
    # waiting room's joins and polls (``queue_calls``).
    endpoints = [row for row in rows if row["Name"] != "Aggregated" and not row["Name"].startswith((WATCH, QUEUE))]
    if endpoints:
        return max(endpoints, key=lambda row: int(row["Request Count"]))
    # A run of a second or so can end before any request was counted: Locust then lists
    # no endpoint, only its (empty) total.
    return next((row for row in rows if row["Name"] == "Aggregated"), NO_REQUESTS)


def _kill(locust: subprocess.Popen) -> None:
    """Kill Locust and the workers it forked (its session's process group)."""
    with suppress(ProcessLookupError):
        os.killpg(locust.pid, signal.SIGKILL)


def hears_ctrl_c(pid: int) -> bool:
    """Whether the process would hear a SIGINT now. A Locust started with SIGINT ignored
    (inherited) listens only once its first line has run: a Ctrl-C sent in the milliseconds
    before, or the seconds before on a loaded machine, is lost, and the crowd would run
    its whole time. Read from Linux's /proc; elsewhere taken as heard."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    ignored = next((line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), "0")
    return not int(ignored, 16) >> (signal.SIGINT - 1) & 1


def number(row: dict, name: str) -> float:
    """A figure of a Locust stats row; 0 where it has none ("N/A" before the first answer)."""
    try:
        return float(row.get(name) or 0)
    except ValueError:
        return 0.0


def crowd_started_at(prefix: Path) -> float | None:
    """When Locust's crowd started (``time.time()``): the first line of the stats history,
    which Locust writes as it starts and every second after; None without one."""
    try:
        with open(f"{prefix}_stats_history.csv") as history:
            first = next(csv.DictReader(history), None)
    except OSError:
        return None
    return number(first, "Timestamp") or None if first else None


def locust_now(prefix: Path) -> tuple[float, float]:
    """(requests per second, p95 ms) of the last few seconds, from the stats history that
    Locust appends to every second while it runs; zeros before its first line."""
    try:
        with open(f"{prefix}_stats_history.csv") as history:
            rows = [row for row in csv.DictReader(history) if row.get("Name") == "Aggregated"]
    except OSError:
        return 0.0, 0.0
    if not rows:
        return 0.0, 0.0

    last = rows[-1]
    # Locust's own "Requests/s" trails by a few seconds; the total's growth over the last
    # rows (about two seconds) follows the run as it goes.
    earlier = rows[-3] if len(rows) >= 3 else rows[0]
    seconds = number(last, "Timestamp") - number(earlier, "Timestamp")
    if seconds > 0:
        rps = (number(last, "Total Request Count") - number(earlier, "Total Request Count")) / seconds
    else:
        rps = number(last, "Requests/s")
    return rps, number(last, "95%")
