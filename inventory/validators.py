"""The checks of what staff enter for an item, whatever its product: its strategy, and whole
numbers within bounds (``InvalidInput``, 422, when wrong)."""

from __future__ import annotations

from core.errors import InvalidInput

from .models import Strategy
from .records import MAX_HOLD_SECONDS


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


def hold_seconds_valid(value: object) -> int:
    """A hold window (``Item.hold_seconds``): whole seconds from 0 (settled when taken) to a day.
    A change applies to takes made after it; a unit held already keeps its deadline."""
    return whole(value, name="hold window (seconds)", minimum=0, maximum=MAX_HOLD_SECONDS)
