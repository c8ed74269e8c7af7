"""The sampler of a run: the product's stock, supply, records and buckets read from the
database about four times a second while Locust runs and its records are written, for the
charts, the race lab's live figures and the count of units stranded.

Imported once Django is set up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from django.db import close_old_connections, connection

from .common import last_out_of_stock
from .console import say
from .products import Product, Sample, Target
from .sales import stranded_units
from .verdict import TAKEN

logger = logging.getLogger(__name__)

V = TypeVar("V")

# How long nothing is left, nothing more taken and nothing waits to be written before a run
# that stops once sold out (``--stop-when-sold-out``) stops its crowd.
QUIET_SECONDS = 1.0

# Called with the run's target, the seconds since Locust started and a sample of the stock,
# about four times a second while Locust runs and its records are written (the race lab
# shows them live).
Observer = Callable[[Target, float, Sample], None]


def from_crowd_start(series: list[tuple[float, V]], offset: float) -> list[tuple[float, V]]:
    """A sampled series on the crowd's clock: ``offset`` seconds (the sampler's lead, while
    Locust started) taken off, what came before kept as its last value at 0."""
    if offset <= 0:
        return series
    before = [v for t, v in series if t < offset]
    after = [(round(t - offset, 2), v) for t, v in series if t >= offset]
    return ([(0.0, before[-1])] if before else []) + after


class Sampler(threading.Thread):
    """Samples the product's stock, its supply, the records that took it and the units left
    in each bucket while Locust runs, for the charts and the progress line."""

    def __init__(
        self,
        product: Product,
        target: Target,
        observe: Observer | None = None,
        sold_out: threading.Event | None = None,
    ) -> None:
        super().__init__(daemon=True)
        # Set once nothing is left and nothing more is taken or waits to be written for
        # ``QUIET_SECONDS`` (``--stop-when-sold-out``): the crowd's run then ends early.
        self.sold_out = sold_out
        self._quiet_since: float | None = None
        self.product = product
        self.target = target
        self.observe = observe
        self.stock: list[tuple[float, int]] = []
        self.taken: list[tuple[float, int]] = []
        self.took: list[tuple[float, int]] = []
        self.supply: list[tuple[float, int]] = []
        # (seconds, units left in each bucket): read in the sample's one query over the rows.
        self.buckets: list[tuple[float, list[int]]] = []
        # (``time.time()``, reservations waiting to be written): when the crowd stopped is
        # known afterwards, by the time of its last answer.
        self.waiting: list[tuple[float, int]] = []
        self.stopped = threading.Event()
        self.started_at = time.time()

    def run(self) -> None:
        started = time.monotonic()
        self.started_at = time.time()
        next_report = 5.0
        name = TAKEN[self.product.name]
        try:
            while not self.stopped.is_set():
                try:
                    sample = self.product.sample(self.target)
                except Exception:  # noqa: BLE001  (a dependency down on purpose: the fault runner)
                    # A connection the database lost stays dead: the next sample opens another.
                    close_old_connections()
                    self.stopped.wait(0.25)
                    continue
                self.waiting.append((time.time(), sample.waiting))
                elapsed = time.monotonic() - started
                at = round(elapsed, 2)
                self.stock.append((at, sample.stock))
                self.taken.append((at, sample.taken))
                self.took.append((at, sample.took))
                self.supply.append((at, sample.supplied))
                self.buckets.append((at, list(sample.buckets)))
                self._watch_sold_out(elapsed, sample)
                if self.observe is not None:
                    try:
                        self.observe(self.target, elapsed, sample)
                    except Exception:  # noqa: BLE001  (the sampling, and the run, go on)
                        logger.exception("observing run %s failed", self.target)
                if elapsed >= next_report:
                    waiting = f", waiting to be written {sample.waiting}" if sample.waiting else ""
                    say(f"  ... {elapsed:.0f}s, stock left {sample.stock}, {name} {sample.taken}{waiting}")
                    next_report += 5.0
                self.stopped.wait(0.25)
        finally:
            connection.close()

    def _watch_sold_out(self, elapsed: float, sample: Sample) -> None:
        if self.sold_out is None or self.sold_out.is_set():
            return
        before = self.took[-2][1] if len(self.took) > 1 else None
        if sample.stock > 0 or sample.waiting or sample.took != before:
            self._quiet_since = None
        elif self._quiet_since is None:
            self._quiet_since = elapsed
        elif elapsed - self._quiet_since >= QUIET_SECONDS:
            say(f"  ... {elapsed:.1f}s, sold out and quiet for {QUIET_SECONDS:g} s: the crowd stops")
            self.sold_out.set()

    def stop(self) -> None:
        self.stopped.set()
        self.join()

    def stranded(self, stock_left: int, outcomes_dir: Path) -> int:
        """``sales.stranded_units`` of its run, the crowd's last refusal for want of stock
        (``common.last_out_of_stock``) put on the sampler's clock."""
        refused = last_out_of_stock(outcomes_dir)
        at = refused - self.started_at if refused is not None else None
        return stranded_units(stock_left, self.supply, at)
