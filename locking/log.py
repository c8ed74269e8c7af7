"""Lock events as log lines: :class:`LockLog`, hooks that write every event through the
standard ``logging`` module (logger ``locking``), for :func:`locking.observe` or ``metrics=``.

Each line says what happened in its message and again as fields (``extra``) for a
structured formatter: ``event``, ``lock`` (the lock's name), and ``wait_ms``, ``held_ms``,
``contended``, ``reason``, ``fence`` or ``error`` as the event has them. Taken, refused and
released are INFO; a renewal is DEBUG; a failed renewal, a lost lease and a stale fence are
WARNING. Whatever else a line should carry (a request's id) is the application's to add
with a logging filter: renewals and lost leases are reported from the watchdog thread, in
the context (``contextvars``) of the code that acquired the lock, so a filter reading a
contextvar finds the acquirer's values there too.
"""

from __future__ import annotations

import logging

from .metrics import LockMetrics

DEBUG, INFO = logging.DEBUG, logging.INFO


class LockLog(LockMetrics):
    """Every lock event as a line of ``logger`` (by default ``locking``)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger("locking")

    def acquired(self, name, *, wait, contended):
        if self.logger.isEnabledFor(INFO):  # first: with INFO off an event costs only this
            ms = round(wait * 1000, 3)
            self.logger.info(
                "lock %s acquired after %.1f ms%s",
                name, ms, " (contended)" if contended else "",
                extra={"event": "lock.acquired", "lock": name, "wait_ms": ms, "contended": contended},
            )  # fmt: skip

    def refused(self, name, *, wait):
        if self.logger.isEnabledFor(INFO):
            ms = round(wait * 1000, 3)
            fields = {"event": "lock.refused", "lock": name, "wait_ms": ms}
            self.logger.info("lock %s refused after %.1f ms", name, ms, extra=fields)

    def released(self, name, *, held):
        if self.logger.isEnabledFor(INFO):
            ms = round(held * 1000, 3)
            fields = {"event": "lock.released", "lock": name, "held_ms": ms}
            self.logger.info("lock %s released after %.1f ms held", name, ms, extra=fields)

    def renewed(self, name):
        if self.logger.isEnabledFor(DEBUG):
            self.logger.debug("lock %s renewed", name, extra={"event": "lock.renewed", "lock": name})

    def renewal_failed(self, name, *, error):
        fields = {"event": "lock.renewal_failed", "lock": name, "error": repr(error)}
        self.logger.warning("lock %s: renewal failed: %r", name, error, extra=fields)

    def lost(self, name, *, reason):
        self.logger.warning(
            "lock %s lost: %s", name, reason, extra={"event": "lock.lost", "lock": name, "reason": reason}
        )

    def stale_fence(self, name, *, fence):
        self.logger.warning(
            "lock %s: write refused, fence %s is stale (a newer holder wrote)",
            name, fence,
            extra={"event": "lock.stale_fence", "lock": name, "fence": fence},
        )  # fmt: skip
