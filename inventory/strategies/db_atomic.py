"""One conditional ``UPDATE ... SET quantity = quantity - n WHERE quantity >= n``.

The read is unguarded (the caller's own snapshot on the first attempt), and the
conditional UPDATE is the guard of the stock. When it misses (the chosen row ran
out since the read), the take reads again and chooses again, at most
``ATOMIC_MAX_ATTEMPTS`` times, then answers ``busy``. What that does to a draw's
odds under contention: each choice is weighted by stock that may be up to one
race window old, and a draw whose prize ran out meanwhile draws again from the
newer stock. No unit is ever awarded that is not there, but while stock is
falling fast the odds lag behind it: prizes (rather than "no prize") come out
slightly more often than the exact odds of that instant would give.

The per-user rule is guarded by the record's backstop (for orders, the unique key
on voucher and buyer); the check is a plain read that spares a refused buyer the
write. A held record is settled or released by one UPDATE conditional on its status.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from django.conf import settings

from ..models import Stock, Strategy
from .base import (
    Held,
    StockStrategy,
    Take,
    in_transaction,
    read_remaining,
    sold_out_on_negative_stock,
    units_out,
)
from .changes import Change


class AtomicStrategy(StockStrategy):
    name = Strategy.DB_ATOMIC

    def max_attempts(self) -> int:
        return max(1, settings.ATOMIC_MAX_ATTEMPTS)

    def guard(self, take: Take) -> Iterator[Held]:
        return in_transaction()

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        if attempt == 0 and held.snapshot is not None:
            return held.snapshot
        return read_remaining(take.group_id, take.quantity, held.bucket)

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        with sold_out_on_negative_stock():
            taken = Stock.objects.filter(pk=stock_id, quantity__gte=take.quantity).update(**units_out(take.quantity))
        return bool(taken)

    def change_read(self, change: Change, held: Held) -> bool:
        # Nothing to read: the conditional UPDATE on the record's status decides.
        return True
