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

    def take(self, take: Take[R]) -> R:
        raise TypeError("redis_lua reserves in Redis (inventory.reserve); it has no take in the request")
