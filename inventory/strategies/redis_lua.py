"""One Lua script checks and reserves in Redis; a Celery worker writes the records.

None of the base sequence runs in the request: one script call (``inventory.lua.RESERVE``,
through ``Reservations.reserve``) counts the request's rate limits, checks the window by
Redis' clock, the user's takes and the stock, chooses by weight, decrements and appends
the pending reservation, atomically; the take answers with the record as it will be,
pending (the API's 202). Nothing here reads the database.

A worker writes the records and the stock rows' decrement in batches
(``inventory.persist``), asked by the script's answer about once per
``RESERVATIONS_KICK_MS`` in a crowd; an ask that fails (the broker down) is logged, not
raised, and the beat's sweep catches up. ``StateMissing`` (503) when Redis holds no state
for the item: nothing is sold from nothing, a worker is asked (at most once a second per
group) to rebuild it from the database, and a caller that read the item before a switch
away from ``redis_lua`` reads it again (``inventory.take``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

from django.conf import settings

from core import requestid
from core.errors import DomainError
from core.ratelimit import rate_refuse
from core.window import Ended, NotStarted

from ..errors import SoldOut, StateMissing
from ..models import Strategy
from ..reservations import REACHABLE, reservations_client
from ..tasks import reservations_drain, reservations_rebuild
from .base import R, StockStrategy, Take

logger = logging.getLogger(__name__)

_system_random = random.SystemRandom()

_REFUSED: dict[str, type[DomainError]] = {"not_started": NotStarted, "ended": Ended, "sold_out": SoldOut}


class RedisLuaStrategy(StockStrategy):
    name = Strategy.REDIS_LUA
    deferred = True

    def take(self, take: Take[R]) -> R:
        reservations = reservations_client()
        with REACHABLE:
            reserved = reservations.reserve(
                group_id=take.group_id,
                user_id=take.user_id,
                rand=_system_random.random() if take.rand is None else take.rand(),
                kick_ms=settings.RESERVATIONS_KICK_MS,
                # Kept with the reservation, for the worker's line about its row.
                request_id=requestid.current() or "",
                rate=take.rate,
            )
        if reserved.refusal is None:
            if reserved.kick:
                _ask(lambda: reservations_drain.delay(take.kind, take.item_id, take.group_id), "persist", take)
            return take.reserved(reserved)
        if reserved.refusal == "rate_limited":
            rate_refuse(reserved.wait_ms)
        if reserved.refusal == "limit":
            raise take.over_limit()
        if reserved.refusal == "unavailable":
            if reservations.claim_rebuild(group_id=take.group_id):
                _ask(lambda: reservations_rebuild.delay(take.kind, take.item_id), "rebuild", take)
            raise StateMissing()
        raise _REFUSED[reserved.refusal]()


def _ask(ask: Callable[[], object], what: str, take: Take) -> None:
    try:
        ask()
    except Exception:  # the broker down: the beat's sweep and reconciliation catch up
        logger.warning(
            "Could not ask a worker to %s %s %s; the periodic sweep will.", what, take.kind, take.item_id, exc_info=True
        )
