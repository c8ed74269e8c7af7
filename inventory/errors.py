"""The errors of taking stock, whatever the product."""

from __future__ import annotations

from core.errors import DomainError


class SoldOut(DomainError):
    """No candidate row had the units asked for. Products may answer it in their own
    words (a pool says ``pool_empty``)."""

    code = "sold_out"
    status = 409
    default_message = "Sold out."


class LockBusy(DomainError):
    """Too much contention right now; the caller may retry. Nothing was written."""

    code = "busy"
    status = 409
    default_message = "Too many buyers at once; try again."


class InvalidQuantity(DomainError):
    code = "invalid_quantity"
    status = 422
    default_message = "Quantity must be a positive whole number."
