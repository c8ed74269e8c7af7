"""Taking stock under ``redis_lua``: one script call in the request; the record is written
later by a worker (``inventory.persist``). The products own the rules and the answers;
this module owns the call, its refusals and the asks it makes of the workers.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import UTC, datetime

import redis
from django.conf import settings

from core import requestid
from core.errors import DomainError, Unavailable
from core.ratelimit import RateCount, rate_refuse
from core.window import Ended, NotStarted

from .errors import SoldOut
from .reservations import Failed, Pending, Reserved, reservations_client

logger = logging.getLogger(__name__)

_system_random = random.SystemRandom()

_REFUSED: dict[str, type[DomainError]] = {"not_started": NotStarted, "ended": Ended, "sold_out": SoldOut}


class StateMissing(Unavailable):
    """The item's state is not in Redis (Redis restarted empty, or it is being rebuilt):
    nothing is sold from nothing, and reconciliation rebuilds it from the database."""

    default_message = "This sale is being restored after a Redis restart; try again in a few seconds."


def stock_reserve(
    *,
    group_id: int,
    user_id: int,
    over_limit: Callable[[], DomainError],
    persist_soon: Callable[[], object],
    rebuild_soon: Callable[[], object],
    rand: float | None = None,
    rate: RateCount | None = None,
) -> Reserved:
    """Reserve one unit of the stock group for ``user_id`` (``inventory.lua.RESERVE``).

    Raises ``NotStarted``/``Ended`` outside the window (Redis' clock), ``over_limit()``
    when the user has used every take, ``SoldOut`` when nothing is left, ``StateMissing``
    when Redis holds no state for the group, and ``Unavailable`` when Redis cannot be
    reached. Nothing is reserved on any error. The current request's id
    (``core.requestid``) is kept with the reservation, for the worker's line about its row.

    Arguments:
        persist_soon: asks a worker to persist the group's reservations; called when the
            script says so (about once per ``RESERVATIONS_KICK_MS`` in a crowd). A failure
            to ask is logged, not raised: the reservation is made, and the periodic sweep
            persists it.
        rebuild_soon: asks a worker to rebuild the missing state; called at most once a
            second per group.
        rand: the weighted choice's uniform number in [0, 1); a system random one by default.
        rate: the request's rate limits, counted in the script's round trip first:
            ``RateLimited`` (429) when over one, and nothing reserved.
    """
    reservations = reservations_client()
    try:
        reserved = reservations.reserve(
            group_id=group_id,
            user_id=user_id,
            rand=_system_random.random() if rand is None else rand,
            kick_ms=settings.RESERVATIONS_KICK_MS,
            request_id=requestid.current() or "",
            rate=rate,
        )
    except redis.RedisError as exc:
        raise Unavailable("The sale's Redis cannot be reached; try again shortly.") from exc
    if reserved.refusal is None:
        if reserved.kick:
            _ask(persist_soon, "persist the reservations of stock group", group_id)
        return reserved
    if reserved.refusal == "rate_limited":
        rate_refuse(reserved.wait_ms)
    if reserved.refusal == "limit":
        raise over_limit()
    if reserved.refusal == "unavailable":
        if reservations.claim_rebuild(group_id=group_id):
            _ask(rebuild_soon, "rebuild the state of stock group", group_id)
        raise StateMissing()
    raise _REFUSED[reserved.refusal]()


def _ask(ask: Callable[[], object], what: str, group_id: int) -> None:
    try:
        ask()
    except Exception:  # the broker down: the beat's sweep and reconciliation catch up
        logger.warning("Could not ask a worker to %s %s; the periodic sweep will.", what, group_id, exc_info=True)


def reservation_find(*, reservation: int, user_id: int) -> Pending | Failed | None:
    """The user's reservation while it waits (``Pending``) or once undone (``Failed``); None
    when it is neither (look for its record in the database) or is another user's."""
    try:
        found = reservations_client().lookup(reservation=reservation)
    except redis.RedisError as exc:
        raise Unavailable("The sale's Redis cannot be reached; try again shortly.") from exc
    if isinstance(found, Pending | Failed) and found.user_id == user_id:
        return found
    return None


def reservations_of_user(*, group_ids: list[int], user_id: int) -> list[Pending | Failed]:
    """The user's waiting and undone reservations in the given stock groups."""
    reservations = reservations_client()
    found: list[Pending | Failed] = []
    try:
        for group_id in group_ids:
            found += reservations.of_user(group_id=group_id, user_id=user_id)
    except redis.RedisError as exc:
        raise Unavailable("The sale's Redis cannot be reached; try again shortly.") from exc
    return found


def reservation_takes(*, group_id: int, user_id: int) -> int:
    """The user's takes of the group in Redis, pending ones included (0 with no state): one
    HGET, for what pages poll. ``Unavailable`` when Redis cannot be reached."""
    try:
        return reservations_client().takes(group_id=group_id, user_id=user_id)
    except redis.RedisError as exc:
        raise Unavailable("The sale's Redis cannot be reached; try again shortly.") from exc


def reservation_moment(found: Pending | Failed) -> datetime:
    """When the reservation was made, by Redis' clock."""
    return datetime.fromtimestamp(found.at_ms / 1000, tz=UTC)
