"""``SELECT ... FOR UPDATE`` on every row of the group, in primary-key order.

The choice depends on every candidate's stock, so every candidate is locked (every
row of the group, or of the bucket a bucketed item's take reads: only that bucket),
always in the same order so that two takes never deadlock; a restock, which
updates a row, waits for the lock like a buyer. Buyers of one group queue. A held
record is settled or released under ``FOR UPDATE`` on its own row.

SQLite has no ``FOR UPDATE`` (Django leaves it out of the query there); the
transaction's ``BEGIN IMMEDIATE`` (``config.settings.base``) takes SQLite's one
write lock before the read instead, which guards these rows too, and every
other row of the database with them: there every take queues behind every other.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..models import Stock, Strategy
from ..records import Record
from .base import Held, StockStrategy, Take, candidates, in_transaction, sold_out_on_negative_stock, units_out
from .changes import Change, lock_rows


class PessimisticStrategy(StockStrategy):
    name = Strategy.DB_PESSIMISTIC

    def guard(self, take: Take) -> Iterator[Held]:
        return in_transaction()

    def read(self, take: Take, held: Held, attempt: int) -> Mapping[int, int]:
        rows = candidates(take.group_id, held.bucket).select_for_update().order_by("id")
        return dict(rows.values_list("id", "quantity"))

    def write(self, take: Take, held: Held, stock_id: int, remaining: Mapping[int, int]) -> bool:
        with sold_out_on_negative_stock():
            Stock.objects.filter(pk=stock_id).update(**units_out(take.quantity))
        return True

    def change_read(self, change: Change, held: Held) -> bool:
        if change.releases and change.stock_id is not None:
            lock_rows([change.stock_id])  # the stock row before the record, as a take does
        return change.records.select_for_update().filter(status=Record.Status.HELD).exists()
