"""The checks of what staff enter for an item, whatever its product: its strategy, and whole
numbers within bounds (``InvalidInput``, 422, when wrong)."""

from __future__ import annotations

from core.errors import InvalidInput

from .models import Strategy
from .records import (
    MAX_ABANDON_LIMIT,
    MAX_ADMISSION_RATE,
    MAX_HOLD_SECONDS,
    MAX_TICKET_SECONDS,
    MIN_ADMISSION_RATE,
    MIN_TICKET_SECONDS,
    Admission,
)


def strategy_valid(strategy: str) -> str:
    """``strategy`` when it names one of ``Strategy``."""
    if strategy not in Strategy.values:
        raise InvalidInput(f"Unknown strategy {strategy!r}; use one of: {', '.join(Strategy.values)}.")
    return strategy


def whole(value: object, *, name: str, minimum: int, maximum: int) -> int:
    """``value`` when it is an int (not a bool) from ``minimum`` to ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidInput(f"{name} must be a whole number from {minimum} to {maximum:,}.")
    return value


def hold_seconds_valid(value: object, *, name: str = "hold window (seconds)") -> int:
    """A hold window (``Item.hold_seconds``): whole seconds from 0 (settled when taken) to a day,
    refused under ``name``, the window's name where it was entered ("Payment window (seconds)").
    A change applies to takes made after it; a unit held already keeps its deadline."""
    return whole(value, name=name, minimum=0, maximum=MAX_HOLD_SECONDS)


def admission_valid(admission: object, rate: object, ticket_seconds: object) -> dict[str, object]:
    """A waiting room's settings (``inventory.admission``), by field: ``open`` or ``queue``, a
    rate of admissions per second within bounds, and a ticket's lifetime in whole seconds."""
    if admission not in Admission.values:
        raise InvalidInput(f"Unknown admission {admission!r}; use one of: {', '.join(Admission.values)}.")
    number = not isinstance(rate, bool) and isinstance(rate, int | float)
    if not number or not MIN_ADMISSION_RATE <= rate <= MAX_ADMISSION_RATE:
        raise InvalidInput(
            f"The admission rate must be a number of admissions per second from {MIN_ADMISSION_RATE} "
            f"to {MAX_ADMISSION_RATE:,.0f}."
        )
    ticket_seconds = whole(
        ticket_seconds, name="admission ticket (seconds)", minimum=MIN_TICKET_SECONDS, maximum=MAX_TICKET_SECONDS
    )
    return {"admission": admission, "admission_rate": float(rate), "admission_ticket_seconds": ticket_seconds}


def abandon_limit_valid(value: object, *, name: str = "abandoned holds per user") -> int:
    """The cap on a user's abandoned holds of an item (``Item.abandon_limit``): 0 (no cap) to
    ``MAX_ABANDON_LIMIT``. A change applies to the next take, counted from every hold the user
    abandoned before it."""
    return whole(value, name=name, minimum=0, maximum=MAX_ABANDON_LIMIT)


def abandon_cooldown_valid(value: object, *, name: str = "cooldown after an abandoned hold (seconds)") -> int:
    """The cooldown after an abandoned hold (``Item.abandon_cooldown_seconds``): whole seconds
    from 0 (none) to a day."""
    return whole(value, name=name, minimum=0, maximum=MAX_HOLD_SECONDS)
