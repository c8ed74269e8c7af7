"""Prometheus metrics of the locks and of reconciliation.

``LockObserver`` is the process's hooks of ``locking`` (installed by ``InventoryConfig.ready``
through ``locking.observe``, so the library knows nothing of Prometheus); locks are labelled
by kind, their name with every number replaced by ``N`` (``stock-group:N``,
``voucher:N:user:N``, ``reservations:N``), never by the name itself, which names a user or
an item.
"""

from __future__ import annotations

import re
import threading

from prometheus_client import Counter, Histogram

from core.metrics import Children
from locking.metrics import LockMetrics

# Seconds: an uncontended lock takes a round trip (well under a millisecond); a queued one
# up to LOCK_WAIT_SECONDS; a hold lasts a transaction.
LOCK_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

LOCK_ACQUIRES = Counter(
    "flashsale_lock_acquires_total",
    "Lock acquisitions by lock kind and result: free (taken at the first attempt), waited "
    "(taken after finding it held: contention) or busy (not taken: fail-fast, or the wait timed out).",
    ["lock", "result"],
)
LOCK_WAIT = Histogram(
    "flashsale_lock_wait_seconds",
    "Seconds from asking for a lock until it was taken, by lock kind.",
    ["lock"],
    buckets=LOCK_BUCKETS,
)
LOCK_HOLD = Histogram(
    "flashsale_lock_hold_seconds",
    "Seconds a lock was held, from taken to released, by lock kind.",
    ["lock"],
    buckets=LOCK_BUCKETS,
)
LOCK_RENEWALS = Counter(
    "flashsale_lock_renewals_total",
    "Lease renewals by the watchdog, by lock kind and result (renewed, or failed on a transport error).",
    ["lock", "result"],
)
LOCK_LOST = Counter(
    "flashsale_lock_lost_total",
    "Leases lost while held (expired, taken over, or not renewed in time), by lock kind.",
    ["lock"],
)
LOCK_STALE_FENCES = Counter(
    "flashsale_lock_stale_fences_total",
    "Fenced writes the database refused because a newer holder of the lock had written, by lock kind.",
    ["lock"],
)
RECONCILE_DRIFT = Counter(
    "flashsale_reconcile_drift_total",
    "redis_lua items whose Redis state reconciliation found drifted from the database, missing "
    "or rebuilt, by kind (voucher, pool).",
    ["kind"],
)

_NUMBERS = re.compile(r"\d+")
# Past this many kinds, names are someone's own scheme (cache.lock() takes any): they share one.
MAX_LOCK_KINDS = 32


class LockObserver(LockMetrics):
    """Every lock event of the process, as Prometheus series by lock kind."""

    def __init__(self) -> None:
        self._kinds: dict[str, str] = {}
        self._guard = threading.Lock()
        self._acquires = Children(LOCK_ACQUIRES)
        self._wait = Children(LOCK_WAIT)
        self._hold = Children(LOCK_HOLD)
        self._renewals = Children(LOCK_RENEWALS)
        self._lost = Children(LOCK_LOST)
        self._stale = Children(LOCK_STALE_FENCES)

    def kind(self, name: str) -> str:
        """``name`` with its numbers as ``N``; ``many`` for a ``lock_many``; ``other`` past
        ``MAX_LOCK_KINDS`` kinds."""
        if " locks (" in name:
            return "many"
        kind = _NUMBERS.sub("N", name)
        known = self._kinds.get(kind)
        if known is not None:
            return known
        with self._guard:
            if len(self._kinds) >= MAX_LOCK_KINDS:
                return "other"
            return self._kinds.setdefault(kind, kind)

    def acquired(self, name, *, wait, contended):
        kind = self.kind(name)
        self._acquires(kind, "waited" if contended else "free").inc()
        self._wait(kind).observe(wait)

    def refused(self, name, *, wait):
        self._acquires(self.kind(name), "busy").inc()

    def released(self, name, *, held):
        self._hold(self.kind(name)).observe(held)

    def renewed(self, name):
        self._renewals(self.kind(name), "renewed").inc()

    def renewal_failed(self, name, *, error):
        self._renewals(self.kind(name), "failed").inc()

    def lost(self, name, *, reason):
        self._lost(self.kind(name)).inc()

    def stale_fence(self, name, *, fence):
        self._stale(self.kind(name)).inc()


def drift_counted(kind: str, items: int) -> None:
    """Count ``items`` of ``kind`` that reconciliation found drifted, missing or rebuilt."""
    if items:
        RECONCILE_DRIFT.labels(kind).inc(items)
