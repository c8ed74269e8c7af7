"""One Lua script checks and reserves in Redis; a Celery worker writes the records.

Nothing of the sequence above runs in the request: the script checks the window,
the user's takes and the stock, chooses, decrements and appends the pending
reservation, atomically (``inventory.lua``), and the API answers 202. The records
and the stock rows' decrement are written in batches by a worker
(``inventory.persist``). The products reserve through ``inventory.reserve``.
"""

from __future__ import annotations

from ..models import Strategy
from .base import R, StockStrategy, Take


class RedisLuaStrategy(StockStrategy):
    name = Strategy.REDIS_LUA
    deferred = True
    explanation = "one Lua script checks and reserves in Redis; a Celery worker writes the order afterwards (202)"
    why = (
        "It holds because Redis runs one script at a time: no buyer's check and decrement can "
        "interleave with another's. The cost moves out of the request: the buyer hears 202 (pending) "
        "and a worker writes the records in batches, so Redis holds the sale until then. Redis must "
        "not evict its keys, and a missing state is rebuilt from the database; until then buyers hear "
        "503, never a sale from nothing."
    )

    def take(self, take: Take[R]) -> R:
        raise TypeError("redis_lua reserves in Redis (inventory.reserve); it has no take in the request")
