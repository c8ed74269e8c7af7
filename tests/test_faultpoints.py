"""The fault point the fault runner stops a lock holder at (``core.faultpoints``): off unless
the process's environment names a folder, and then once per arming, in one process only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Reaches the point twice, then says it went past.
SCRIPT = "from core.faultpoints import fault_point; fault_point('here'); fault_point('here'); print('past')"


def run(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=os.environ | env, stdout=subprocess.PIPE, text=True
    )


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_without_a_folder_the_point_does_nothing(tmp_path):
    (tmp_path / "here").touch()
    environ = {key: value for key, value in os.environ.items() if key != "FAULT_POINTS_DIR"}
    completed = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=environ, capture_output=True, text=True)
    assert completed.stdout == "past\n"
    assert (tmp_path / "here").exists()  # nobody took it


def test_an_armed_point_stops_the_first_process_there_once_until_it_is_continued(tmp_path):
    (tmp_path / "here").touch()
    process = run({"FAULT_POINTS_DIR": str(tmp_path)})
    mark = tmp_path / f"here.{process.pid}"
    give_up = time.monotonic() + 30
    while not (mark.exists() and state(process.pid) == "T"):
        assert time.monotonic() < give_up, "the process never stopped at the point"
        time.sleep(0.01)
    assert not (tmp_path / "here").exists()  # disarmed: no other process stops there

    os.kill(process.pid, signal.SIGCONT)

    # The second pass found the point disarmed and went on.
    assert process.communicate(timeout=30)[0] == "past\n"
