"""The naive code inside a ``threading.Lock`` per stock group: safe in one process only.

The lock is the guard; the write and the record commit in their own transaction
inside it, so the next holder in this process reads the committed stock. Another
process neither sees the lock nor waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..models import Strategy
from .base import Held, Take
from .none import NaiveStrategy


class LocalLockStrategy(NaiveStrategy):
    name = Strategy.LOCAL
    breaks = "across_processes"

    def __init__(self) -> None:
        self._locks: dict[int, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def _lock_for(self, group_id: int) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(group_id, threading.Lock())

    @contextmanager
    def guard(self, take: Take) -> Iterator[Held]:
        # Released after the write's commit, so the next holder in this process sees the write.
        with self._lock_for(take.group_id):
            yield Held()
