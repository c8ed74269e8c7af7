"""Waiting on a condition, not on the clock: a test that needs another thread or process to
get somewhere polls for the state that shows it got there."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], what: str, timeout: float = 10, every: float = 0.005) -> None:
    """Return once ``condition()`` is true; fail naming ``what`` after ``timeout`` seconds."""
    give_up = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < give_up, f"timed out waiting until {what}"
        time.sleep(every)
