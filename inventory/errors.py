"""Typed domain errors. Each carries a machine ``code`` that the API answers with."""

from __future__ import annotations


class DomainError(Exception):
    code: str = "error"
    default_message: str = "The request could not be completed."

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.default_message
        super().__init__(self.message)


class SoldOut(DomainError):
    code = "sold_out"
    default_message = "Sold out."


class LockBusy(DomainError):
    """Too much contention right now; the caller may retry. Nothing was written."""

    code = "busy"
    default_message = "Too many buyers at once; try again."


class NotStarted(DomainError):
    code = "not_started"
    default_message = "The sale has not started yet."


class Ended(DomainError):
    code = "ended"
    default_message = "The sale has ended."


class InvalidQuantity(DomainError):
    code = "invalid_quantity"
    default_message = "Quantity must be a positive whole number."


class InvalidVoucher(DomainError):
    code = "invalid"
    default_message = "The voucher is not valid."
