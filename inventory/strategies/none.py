"""Read the stock, choose, pause, write ``remaining - n`` from Python: the textbook race.

No guard: the check ("has an order?", "draws used?") and the read are plain
autocommit queries, and only the absolute write and the record share a
transaction, so every buyer who read before the first write commits sees the
same stock and writes the same number. A held record is released or settled the same
way: whoever read it held writes, so one record is paid and released, or released twice;
the expiry of an item's due holds releases each by that change, so sweeps racing release
one twice too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext

from django.db import transaction

from ..models import Stock, Strategy
from .base import Held, StockStrategy, Take, read_remaining, units_out
from .changes import Expiry


class NaiveStrategy(StockStrategy):
    name = Strategy.NONE
    guarded = False
    breaks = "always"

    def guard(self, take: Take) -> Iterator[Held]:
        return nullcontext(Held())

    def writing(self, take: Take, held: Held) -> AbstractContextManager[object]:
        return transaction.atomic()

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        return read_remaining(take.group_id, take.quantity, held.bucket)

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        # An absolute write: a concurrent buyer's decrement is silently lost.
        # The running total of units taken is relative, as in every strategy: the audit's
        # count of records, which the lost update does not touch.
        Stock.objects.filter(pk=stock_id).update(
            **{**units_out(take.quantity), "quantity": remaining[stock_id] - take.quantity}
        )
        return True

    def expire(self, expiry: Expiry) -> int:
        # The due records read once, plainly, then each released by its own change: read
        # held, pause, write, as a cancel of it is.
        rows = expiry.due.values_list("pk", "user_id", expiry.unit_field)[: expiry.batch]
        return sum(self.change(expiry.change_of(*row)) for row in rows)
