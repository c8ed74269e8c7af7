"""Fault points: places where the fault runner (``loadtests.faults``) can stop a process on
purpose, at a moment no signal sent from outside could hit reliably.

``fault_point("group-lock-held")`` does nothing unless the process's environment names a
folder in ``FAULT_POINTS_DIR``, which only the fault runner's server has: never set it in a
deployment. Then, when that folder holds a file named after the point (the runner arms it),
the first process to get there takes the file away (only one can), leaves
``<point>.<pid>`` in its place and stops itself with SIGSTOP, all its threads with it (the
lock watchdog too, so its leases run out). The runner resumes it with SIGCONT once it has
seen what it wanted to see.

A stop is what a long garbage-collection pause, a swapped-out process or a virtual machine
frozen by its host does to a lock holder, which then wakes up believing it still holds.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

# Read once: the hot path pays one comparison when no runner armed anything.
_FOLDER = os.environ.get("FAULT_POINTS_DIR") or None


def fault_point(name: str) -> None:
    """Stop this process here if the fault runner armed the point ``name``."""
    if _FOLDER is None:
        return
    armed = Path(_FOLDER) / name
    try:
        armed.unlink()
    except FileNotFoundError:
        return
    (Path(_FOLDER) / f"{name}.{os.getpid()}").touch()
    os.kill(os.getpid(), signal.SIGSTOP)
