"""Compare-and-set on the group's version, retried a bounded number of times.

The choice read every candidate, so the compare covers every candidate: the
group's version, which this strategy's writes and every restock bump. A lost
compare-and-set writes nothing; after ``OPTIMISTIC_MAX_ATTEMPTS`` losses the
buyer is told ``busy`` rather than queued, so the strategy sheds load. A held record is
settled or released by a compare-and-set on the status it read: every change changes it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping

from django.conf import settings
from django.db.models import F

from ..models import Stock, StockGroup, Strategy
from .base import Held, StockStrategy, Take, in_transaction, sold_out_on_negative_stock, units_out


class OptimisticStrategy(StockStrategy):
    name = Strategy.DB_OPTIMISTIC
    sheds_load = True

    def max_attempts(self) -> int:
        return max(1, settings.OPTIMISTIC_MAX_ATTEMPTS)

    def guard(self, take: Take) -> Iterator[Held]:
        return in_transaction()

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        rows = list(
            Stock.objects.filter(group_id=take.group_id).order_by("id").values_list("id", "quantity", "group__version")
        )
        held.group_version = rows[0][2] if rows else 0
        return {stock_id: quantity for stock_id, quantity, _ in rows}

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        won = StockGroup.objects.filter(pk=take.group_id, version=held.group_version).update(version=F("version") + 1)
        if not won:
            return False
        with sold_out_on_negative_stock():
            Stock.objects.filter(pk=stock_id).update(**units_out(take.quantity))
        return True

    def before_retry(self, attempt: int) -> None:
        # Jittered exponential back-off so the losers do not collide again in step.
        time.sleep(random.uniform(0, 0.002 * (2**attempt)))
