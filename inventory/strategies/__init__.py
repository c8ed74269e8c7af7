"""The registry of the concurrency strategies: one module each in this package, over
``base`` (the take and its fixed sequence); a reader who wants one strategy reads its
module and ``base.py``.

Adding a strategy takes its module and a line here, its name in
``inventory.models.Strategy`` (the one list of names, which the API, the settings check
and the models' choices read; this registry must match it, or importing it fails), and
its page texts in ``inventory.texts`` (docs/design.md, "Strategies"). No migration: the
models' choices are a callable.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from ..models import Strategy
from .base import StockStrategy
from .db_atomic import AtomicStrategy
from .db_optimistic import OptimisticStrategy
from .db_pessimistic import PessimisticStrategy
from .local import LocalLockStrategy
from .none import NaiveStrategy
from .redis_lock import RedisLockStrategy
from .redis_lua import RedisLuaStrategy
from .redlock import RedlockStrategy

STRATEGIES: dict[str, StockStrategy] = {
    strategy.name: strategy
    for strategy in (
        NaiveStrategy(),
        LocalLockStrategy(),
        PessimisticStrategy(),
        OptimisticStrategy(),
        AtomicStrategy(),
        RedisLockStrategy(),
        RedlockStrategy(),
        RedisLuaStrategy(),
    )
}
if list(STRATEGIES) != Strategy.values:
    raise ImproperlyConfigured(
        f"The registry names {[str(name) for name in STRATEGIES]}, inventory.models.Strategy {Strategy.values}: "
        "every strategy needs both, in the same order."
    )


def strategy_names(*, breaks: str | None | bool = True, deferred: bool | None = None) -> list[str]:
    """Strategy names in registry order. ``breaks=True`` (the default) lists all;
    ``None`` only the safe ones; ``"always"`` or ``"across_processes"`` those that
    break that way. ``deferred`` keeps only the strategies that are (True) or are not
    (False) deferred; None, the default, keeps both."""
    return [
        name
        for name, strategy in STRATEGIES.items()
        if (breaks is True or strategy.breaks == breaks) and (deferred is None or strategy.deferred == deferred)
    ]
