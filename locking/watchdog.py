"""One renewal scheduler per process, shared by every lock that renews its lease.

A single daemon thread sleeps until the next renewal is due; a lock is watched
from acquire to release under a ticket of its own. After ``fork`` the child gets
a fresh, empty scheduler, so it never renews a lock its parent holds.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol


class Renewable(Protocol):
    def _renew_due(self) -> float | None:
        """Renew now; return the monotonic time of the next renewal, or None to stop."""


class Watchdog:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heap: list[tuple[float, int]] = []
        self._watched: dict[int, Renewable] = {}
        self._tickets = itertools.count(1)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, lock: Renewable, due: float) -> int:
        """Call ``lock._renew_due()`` at ``due`` and then when it says; returns the ticket for :meth:`forget`."""
        with self._cond:
            ticket = next(self._tickets)
            self._watched[ticket] = lock
            heapq.heappush(self._heap, (due, ticket))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lock-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()
            return ticket

    def forget(self, ticket: int) -> None:
        with self._cond:
            self._watched.pop(ticket, None)

    def __len__(self) -> int:
        with self._cond:
            return len(self._watched)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                due, ticket = self._heap[0]
                delay = due - self._clock()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                heapq.heappop(self._heap)
                lock = self._watched.get(ticket)
            if lock is None:
                continue
            next_due = lock._renew_due()
            with self._cond:
                if ticket not in self._watched:
                    continue
                if next_due is None:
                    del self._watched[ticket]
                else:
                    heapq.heappush(self._heap, (next_due, ticket))


_watchdog = Watchdog()


def watchdog() -> Watchdog:
    """This process's scheduler."""
    return _watchdog


def _reset_after_fork() -> None:
    global _watchdog
    _watchdog = Watchdog()


os.register_at_fork(after_in_child=_reset_after_fork)
