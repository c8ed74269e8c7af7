"""A small map kept in one process, whose entries expire: for the few reads that every
request of a flash sale would otherwise make of rows that hardly ever change."""

from __future__ import annotations

import time
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ProcessMemo(Generic[K, V]):
    """``key -> value`` for ``ttl`` seconds, at most ``max_size`` entries (all dropped when
    full: the entries are cheap to read again, and a sweep per insert is not).

    One per process (gunicorn forks its workers before any request, so each starts
    empty); a sync worker serves one request at a time, and a threaded one only ever
    reads a stale or a fresh entry, never a torn one (dict operations are atomic).
    """

    def __init__(self, *, ttl: float, max_size: int = 4096) -> None:
        self.ttl = ttl
        self.max_size = max_size
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, key: K, value: V) -> None:
        if len(self._entries) >= self.max_size:
            self._entries.clear()
        self._entries[key] = (time.monotonic() + self.ttl, value)

    def forget(self, key: K) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
