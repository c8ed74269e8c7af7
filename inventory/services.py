"""Writes to vouchers and their stock. Purchases live in ``orders.services``."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from .errors import InvalidQuantity, InvalidVoucher
from .models import Stock, Strategy, Voucher
from .stock import stock_restock


def _validate_window(begin_at: datetime, end_at: datetime) -> None:
    if begin_at.tzinfo is None or end_at.tzinfo is None:
        raise InvalidVoucher("begin_at and end_at need a UTC offset (ISO 8601, such as 2026-01-01T10:00:00+00:00).")
    if end_at <= begin_at:
        raise InvalidVoucher("end_at must be after begin_at.")


def _validate_strategy(strategy: str) -> None:
    if strategy not in Strategy.values:
        raise InvalidVoucher(f"Unknown strategy {strategy!r}; use one of: {', '.join(Strategy.values)}.")


@transaction.atomic
def voucher_create(
    *,
    title: str,
    stock: int,
    begin_at: datetime,
    end_at: datetime,
    strategy: str,
    description: str = "",
) -> Voucher:
    title = title.strip()
    if not title:
        raise InvalidVoucher("title must not be empty.")
    if isinstance(stock, bool) or not isinstance(stock, int) or stock < 0:
        raise InvalidQuantity("stock must be a whole number, zero or more.")
    _validate_window(begin_at, end_at)
    _validate_strategy(strategy)
    stock_row = Stock.objects.create(quantity=stock, initial_quantity=stock)
    return Voucher.objects.create(
        title=title,
        description=description,
        begin_at=begin_at,
        end_at=end_at,
        strategy=strategy,
        stock=stock_row,
    )


def voucher_update(
    *,
    voucher: Voucher,
    restock: int | None = None,
    strategy: str | None = None,
    begin_at: datetime | None = None,
    end_at: datetime | None = None,
) -> Voucher:
    """Change a voucher's window or strategy and/or add stock; all or nothing."""
    new_begin = begin_at or voucher.begin_at
    new_end = end_at or voucher.end_at
    if begin_at is not None or end_at is not None:
        _validate_window(new_begin, new_end)
    if strategy is not None:
        _validate_strategy(strategy)
    if restock is not None and (isinstance(restock, bool) or not isinstance(restock, int) or restock < 1):
        raise InvalidQuantity("restock must be a positive whole number.")
    with transaction.atomic():
        fields = []
        if strategy is not None:
            voucher.strategy = strategy
            fields.append("strategy")
        if begin_at is not None or end_at is not None:
            voucher.begin_at, voucher.end_at = new_begin, new_end
            fields += ["begin_at", "end_at"]
        if fields:
            voucher.save(update_fields=fields)
        if restock is not None:
            stock_restock(stock_id=voucher.stock_id, quantity=restock)
    voucher.stock.refresh_from_db()
    return voucher
