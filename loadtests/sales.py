"""What a run's series say of its sale: how fast it sold, and the units it stranded."""

from __future__ import annotations

# A unit supplied this long before the crowd was last told nothing was left may not have
# been seen by that refusal, which answers what its strategy read a moment before.
STRANDED_MARGIN_SECONDS = 1.0


def sales_per_second(taken: list[tuple[float, int]]) -> float:
    """How fast a run sold while it sold: the units taken from the crowd's start until the
    count last grew, over those seconds (a sale that sold out early is not diluted by the
    refusals after); 0 when it sold nothing."""
    if not taken:
        return 0.0
    first, last = taken[0][1], taken[-1][1]
    done = next(t for t, n in taken if n == last)
    return (last - first) / done if done > 0 and last > first else 0.0


def stranded_units(stock_left: int, supply: list[tuple[float, int]], refused_at: float | None) -> int:
    """Units stranded: left in stock at the end of a sale although a buyer was told nothing
    was left. ``supply`` is the units supplied over time and ``refused_at`` the last moment
    the crowd was refused for want of stock (None: never), on one clock. The stock left,
    less the units supplied from ``STRANDED_MARGIN_SECONDS`` before that refusal on (a
    restock it may not have seen): each of the others sat in some bucket, or row, while a
    buyer was turned away. 0 when nobody was refused for want of stock."""
    if refused_at is None:
        return 0
    seen = [units for at, units in supply if at <= refused_at - STRANDED_MARGIN_SECONDS]
    supplied_then = seen[-1] if seen else (supply[0][1] if supply else 0)
    supplied_later = (supply[-1][1] if supply else supplied_then) - supplied_then
    return max(0, stock_left - max(0, supplied_later))
