"""A voucher's stock as the shop reads it (``inventory.totals``: its group's rows summed), and
the row its takes take from, for the tests' assertions and for records they write by hand."""

from __future__ import annotations

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
