"""Metrics hooks. Subclass :class:`LockMetrics` and pass it as ``metrics=``, or install
one (or several) for every lock of the process with :func:`observe`;
:class:`locking.LockLog` writes every event as a log line.

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


class Fanout(LockMetrics):
    """Several hooks as one: each event goes to every hook, in order."""

    def __init__(self, hooks: list[LockMetrics]) -> None:
        self.hooks = tuple(hooks)

    def acquired(self, name, *, wait, contended):
        for hook in self.hooks:
            hook.acquired(name, wait=wait, contended=contended)

    def refused(self, name, *, wait):
        for hook in self.hooks:
            hook.refused(name, wait=wait)

    def released(self, name, *, held):
        for hook in self.hooks:
            hook.released(name, held=held)

    def renewed(self, name):
        for hook in self.hooks:
            hook.renewed(name)

    def renewal_failed(self, name, *, error):
        for hook in self.hooks:
            hook.renewal_failed(name, error=error)

    def lost(self, name, *, reason):
        for hook in self.hooks:
            hook.lost(name, reason=reason)

    def stale_fence(self, name, *, fence):
        for hook in self.hooks:
            hook.stale_fence(name, fence=fence)


NO_METRICS = LockMetrics()

_observer: LockMetrics = NO_METRICS


def observe(*metrics: LockMetrics | None) -> None:
    """Make ``metrics`` the hooks of every lock created from now on without ``metrics=`` of
    its own (none, or only None: none again; several: each hears every event, as a
    :class:`Fanout`). An application installs its exporter (and :class:`locking.LockLog` for
    log lines) once at start-up, so that the code creating locks need not carry them; the
    library stays free of any one metrics or logging system."""
    global _observer
    hooks = [hook for hook in metrics if hook is not None]
    _observer = NO_METRICS if not hooks else hooks[0] if len(hooks) == 1 else Fanout(hooks)


def observer() -> LockMetrics:
    """The hooks installed by :func:`observe` (no-ops until then)."""
    return _observer
