"""A voucher's stock as the shop reads it (``inventory.totals``: its group's rows summed), and
the row its takes take from, for the tests' assertions and for records they write by hand."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

from inventory.models import Stock
from inventory.totals import group_marks, group_rows
from orders.models import Voucher


def stock_left(voucher: Voucher) -> int:
    """The units left of ``voucher``, read now."""
    return group_marks(group_id=voucher.group_id).stock


def stock_supplied(voucher: Voucher) -> int:
    """The units ``voucher`` was supplied (its initial stock and every restock), read now."""
    return group_marks(group_id=voucher.group_id).supplied


def stock_row(voucher: Voucher) -> int:
    """The stock row of ``voucher``: its group's one row, which every take of it takes."""
    (row,) = group_rows(group_id=voucher.group_id)
    return row


@contextmanager
def stock_rows_held(*ids: int) -> Iterator[None]:
    """Another connection holds the rows' locks (``SELECT ... FOR UPDATE``, a transaction of
    a thread of its own) until the block ends: a take or a draw caught mid-transaction."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(Stock.objects.select_for_update().filter(pk__in=ids).values_list("pk"))
                held.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10), "the other transaction never held the rows"
        yield
    finally:
        release.set()
        holder.join(30)
