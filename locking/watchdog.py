"""One renewal scheduler per process, shared by every lock that renews its lease.

A single daemon thread sleeps until the next renewal is due; a lock is watched
from acquire to release under a ticket of its own. After ``fork`` the child gets
a fresh, empty scheduler, so it never renews a lock its parent holds.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)


class Renewable(Protocol):
    def _renew_due(self) -> float | None:
        """Renew now; return the monotonic time of the next renewal, or None to stop."""

    def _lost_quietly(self, reason: str) -> None:
        """Mark the holding lost without calling any hook (one of them failed)."""


class Watchdog:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heap: list[tuple[float, int]] = []
        self._watched: dict[int, Renewable] = {}
        self._tickets = itertools.count(1)
        self._stale = 0  # heap entries whose lock was released
        # A plain Lock under the Condition: acquire and release sit on every lock's hot path.
        self._cond = threading.Condition(threading.Lock())
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
            elif self._heap[0][1] == ticket:
                self._cond.notify()  # only an earlier deadline needs the sleeper woken
            return ticket

    def forget(self, ticket: int) -> None:
        with self._cond:
            if self._watched.pop(ticket, None) is None:
                return
            self._stale += 1
            # Drop released entries in bulk before they come due: otherwise a busy
            # process would wake the watchdog thousands of times a second for nothing.
            if self._stale > 64 and self._stale > len(self._watched):
                self._heap = [entry for entry in self._heap if entry[1] in self._watched]
                heapq.heapify(self._heap)
                self._stale = 0

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
                    self._stale -= 1
                    continue
            try:
                next_due = lock._renew_due()
            except Exception:
                # A hook of the holder's (``on_lost``, the metrics) failed: logged, and this
                # lock's renewals end, so it is marked lost (``check()`` says so), but never
                # the thread that renews every other lock.
                logger.exception("renewing %r failed; its renewals stop", lock)
                lock._lost_quietly("its renewal failed in a hook of its own")
                next_due = None
            with self._cond:
                if ticket not in self._watched:
                    continue
                if next_due is None:
                    del self._watched[ticket]
                else:
                    heapq.heappush(self._heap, (next_due, ticket))


_renewal_clients: dict[tuple[int, float], tuple[object, object]] = {}
_renewal_guard = threading.Lock()
# The least a renewal waits for its answer, whatever the lease: a loaded machine's Redis
# answers within it, and a lease short enough to need less is a test's.
RENEWAL_REPLY_FLOOR = 0.1


def renewal_client(client, lease: float | None = None):
    """A client to the same server as ``client`` whose connections never retry in silence,
    and wait for an answer a tenth of ``lease`` at most (``RENEWAL_REPLY_FLOOR`` at least).

    redis-py reconnects and retries a command behind the caller's back; for a
    renewal that would hide a dropped connection from the holder. Renewals go
    through this client instead, so a drop surfaces as an error (reported to the
    holder through ``metrics.renewal_failed``) and the next renewal, a moment
    later, uses a fresh connection. One thread renews every lock of the process in
    turn: a renewal waiting a lease for a server that hung (half-open, its packets
    dropped) held up every other lock's, on servers that answer, until their leases
    ended; a tenth of the lease leaves the others most of theirs. Clients other than
    a plain ``redis.Redis`` are returned unchanged.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    if not isinstance(client, redis.Redis):
        return client
    pool = client.connection_pool
    reply = pool.connection_kwargs.get("socket_timeout")
    if lease is not None:
        reply = min(reply or lease, max(lease / 10, RENEWAL_REPLY_FLOOR))
    with _renewal_guard:
        cached = _renewal_clients.get((id(client), reply))
        if cached is not None and cached[0] is client:
            return cached[1]
        kwargs = {**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0), "socket_timeout": reply}
        # One connection held for good: a pooled one would be checked and silently
        # reconnected when handed out, hiding the drop again.
        renewer = redis.Redis(
            connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs),
            single_connection_client=True,
        )
        _renewal_clients[(id(client), reply)] = (client, renewer)
        return renewer


_watchdog = Watchdog()


def watchdog() -> Watchdog:
    """This process's scheduler."""
    return _watchdog


def _reset_after_fork() -> None:
    global _watchdog, _renewal_guard
    _watchdog = Watchdog()
    # The parent's renewal connections must never carry the child's commands.
    _renewal_clients.clear()
    _renewal_guard = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)
