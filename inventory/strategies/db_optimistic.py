"""Compare-and-set on the group's version, retried a bounded number of times.

The choice read every candidate, so the compare covers every candidate: the
group's version, which this strategy's writes and every restock bump. A bucketed item's
take compares the versions of its bucket's rows instead (each write of a row bumps it), so
that takes from different buckets never collide: one UPDATE of the bucket's rows as read,
the chosen one decremented, every row's version bumped, written only if every row still
has the version read (a pool's choice weighs them all; a voucher's bucket is one row). A lost
compare-and-set writes nothing; after ``OPTIMISTIC_MAX_ATTEMPTS`` losses the
buyer is told ``busy`` rather than queued, so the strategy sheds load. A held record is
settled or released by a compare-and-set on the status it read: every change changes it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When

from ..models import Stock, StockGroup, Strategy
from .base import Held, StockStrategy, Take, candidates, in_transaction, sold_out_on_negative_stock, units_out


class _Moved(Exception):
    """A row of the bucket changed since it was read: the savepoint's write is undone."""


class OptimisticStrategy(StockStrategy):
    name = Strategy.DB_OPTIMISTIC
    sheds_load = True

    def max_attempts(self) -> int:
        return max(1, settings.OPTIMISTIC_MAX_ATTEMPTS)

    def guard(self, take: Take) -> Iterator[Held]:
        return in_transaction()

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        if held.bucket is not None:
            rows = candidates(take.group_id, held.bucket).order_by("id").values_list("id", "quantity", "version")
            held.row_versions = {stock_id: version for stock_id, _, version in rows}
            return {stock_id: quantity for stock_id, quantity, _ in rows}
        rows = list(
            Stock.objects.filter(group_id=take.group_id).order_by("id").values_list("id", "quantity", "group__version")
        )
        held.group_version = rows[0][2] if rows else 0
        return {stock_id: quantity for stock_id, quantity, _ in rows}

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        if held.bucket is not None:
            return self._bucket_write(take, held, stock_id)
        won = StockGroup.objects.filter(pk=take.group_id, version=held.group_version).update(version=F("version") + 1)
        if not won:
            return False
        # Only while the row still has the units: a bucketed take, from an item split since this
        # one was read, compares its rows' versions, not the group's, and may have taken them.
        # Written anyway, the row went below zero, and the buyer was told sold out while other
        # buckets had stock; missed, the take reads again.
        return bool(Stock.objects.filter(pk=stock_id, quantity__gte=take.quantity).update(**units_out(take.quantity)))

    @staticmethod
    def _bucket_write(take: Take, held: Held, stock_id: int) -> bool:
        """Compare and set every row of the bucket as read, so that buckets never collide on
        the group's version: one UPDATE that bumps each row's version (``units_out``) and
        decrements the chosen one, in a savepoint undone unless every row still had the
        version read. Its rows are locked in index order, as every take of the bucket locks
        them, so that two takes of one bucket wait for each other, never deadlock."""
        read = held.row_versions
        same = Q()
        for row_id, version in read.items():
            same |= Q(pk=row_id, version=version)
        units = take.quantity if len(read) == 1 else Case(When(pk=stock_id, then=Value(take.quantity)), default=0)
        try:
            with transaction.atomic(), sold_out_on_negative_stock():
                if Stock.objects.filter(same).update(**units_out(units)) != len(read):
                    raise _Moved()
        except _Moved:
            return False
        return True

    def before_retry(self, attempt: int) -> None:
        # Jittered exponential back-off so the losers do not collide again in step.
        time.sleep(random.uniform(0, 0.002 * (2**attempt)))
