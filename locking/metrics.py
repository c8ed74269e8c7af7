"""Metrics hooks. Subclass :class:`LockMetrics` and pass it as ``metrics=``, or install
one for every lock of the process with :func:`observe`.

Every hook is called synchronously by the lock (renewal hooks from the watchdog
thread) and must be cheap and must not raise.
"""

from __future__ import annotations


class LockMetrics:
    def acquired(self, name: str, *, wait: float, contended: bool) -> None:
        """The lock was taken after ``wait`` seconds; ``contended`` if it was busy at first."""

    def refused(self, name: str, *, wait: float) -> None:
        """Not acquired: busy (fail-fast) or ``blocking_timeout`` elapsed."""

    def released(self, name: str, *, held: float) -> None:
        """Released after being held ``held`` seconds."""

    def renewed(self, name: str) -> None:
        """The watchdog extended the lease."""

    def renewal_failed(self, name: str, *, error: BaseException) -> None:
        """A renewal hit a transport error; the watchdog retries until the lease would end."""

    def lost(self, name: str, *, reason: str) -> None:
        """The lease was lost while held."""

    def stale_fence(self, name: str, *, fence: int) -> None:
        """A fenced write was refused because a newer holder had written."""


class CountingMetrics(LockMetrics):
    """Counts every event; handy in tests and benchmarks."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.waits: list[float] = []
        self.lost_reasons: list[str] = []
        self.errors: list[BaseException] = []

    def _count(self, event: str) -> None:
        self.counts[event] = self.counts.get(event, 0) + 1

    def acquired(self, name, *, wait, contended):
        self._count("contended" if contended else "uncontended")
        self.waits.append(wait)

    def refused(self, name, *, wait):
        self._count("refused")

    def released(self, name, *, held):
        self._count("released")

    def renewed(self, name):
        self._count("renewed")

    def renewal_failed(self, name, *, error):
        self._count("renewal_failed")
        self.errors.append(error)

    def lost(self, name, *, reason):
        self._count("lost")
        self.lost_reasons.append(reason)

    def stale_fence(self, name, *, fence):
        self._count("stale_fence")


NO_METRICS = LockMetrics()

_observer: LockMetrics = NO_METRICS


def observe(metrics: LockMetrics | None) -> None:
    """Make ``metrics`` the hooks of every lock created from now on without ``metrics=`` of
    its own (None: none again). An application installs its exporter once at start-up, so
    that the code creating locks need not carry it; the library stays free of any one
    metrics system."""
    global _observer
    _observer = NO_METRICS if metrics is None else metrics


def observer() -> LockMetrics:
    """The hooks installed by :func:`observe` (no-ops until then)."""
    return _observer
