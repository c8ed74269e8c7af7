"""One Lua script checks and reserves in Redis; a Celery worker writes the records.

None of the base sequence runs in the request: one script call
(``inventory.redis_lua.scripts.RESERVE``, through ``Reservations.reserve``) counts the
request's rate limits, spends its admission ticket on an item with a waiting room (where the
room lives in the same Redis and the item in one state), checks the window by Redis' clock,
the user's takes, their abandoned holds (the item's cap and cooldown, docs/design.md,
"Abandoned holds") and the stock, chooses by weight, decrements and appends the pending
reservation, atomically; the take answers with the record as it will be, pending (the API's
202). Nothing here reads the database.

A worker writes the records and the stock rows' decrement in batches
(``inventory.redis_lua.persist``), asked by the script's answer about once per
``RESERVATIONS_KICK_MS`` in a crowd; an ask that fails (the broker down) is logged, not
raised, and the beat's sweep catches up. A held record is settled or released by one
UPDATE conditional on its status, as ``db_atomic`` does; a release returns its unit to
Redis as well, once the database committed it, under the group's lock (which
reconciliation holds to compare the two), with the user's abandoned holds as the database
counted them, and so does an expiry's batch, released as every
guarded strategy releases it. ``StateMissing`` (503) when Redis holds no state
for the item: nothing is sold from nothing, a worker is asked (at most once a second per
group) to rebuild it from the database, and a caller that read the item before a switch
away from ``redis_lua`` reads it again (``inventory.take``). With
``RESERVATIONS_WAIT_REPLICAS``, a reservation that the replicas did not confirm in time is
answered 503 ``unconfirmed`` (``Unconfirmed``), not 202.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable
from math import ceil

from celery import current_app
from django.conf import settings
from django.db import transaction

from core import requestid
from core.errors import DomainError
from core.outage import MadeUnanswered
from core.ratelimit import rate_refuse
from core.window import Ended, NotStarted

from ..errors import AbandonLimit, CoolingDown, LockBusy, SoldOut, StateMissing, TicketNotLive, Unconfirmed
from ..models import Strategy
from ..records import public_of
from ..redis_lua.bucket_states import item_states, reserve_at_home, states_layout
from ..redis_lua.client import REACHABLE, reservations_client
from ..redis_lua.drain import with_group_lock
from ..redis_lua.item_buckets import abandoned_values, states_units_return
from ..redis_lua.transfers import transfers_client
from ..redis_lua.values import bucketed_states_allowed, group_tag, reservation_group
from .base import R, StockStrategy, Take
from .changes import Change, Expiry, Returned, change_write, expiry_write

logger = logging.getLogger(__name__)

_system_random = random.SystemRandom()

# The workers' tasks (``inventory.tasks``), sent by name: the strategies stand below the
# tasks, which run them.
DRAIN_TASK = "inventory.tasks.reservations_drain"
REBUILD_TASK = "inventory.tasks.reservations_rebuild"

_REFUSED: dict[str, type[DomainError]] = {
    "not_started": NotStarted,
    "ended": Ended,
    "sold_out": SoldOut,
    "abandon_limit": AbandonLimit,
    "busy": LockBusy,  # a bucketed item's take that others beat to every unit it brought home
}


class RedisLuaStrategy(StockStrategy):
    name = Strategy.REDIS_LUA
    deferred = True

    def take(self, take: Take[R]) -> R:
        reservations = reservations_client()
        options = {
            "user_id": take.user_id,
            "rand": _system_random.random() if take.rand is None else take.rand(),
            "kick_ms": settings.RESERVATIONS_KICK_MS,
            # Kept with the reservation, for the worker's line about its row.
            "request_id": requestid.current() or "",
            "rate": take.rate,
        }
        with REACHABLE:
            # A take with a route of its own (a pool's, by weight) keeps one state
            # (``Product.routes_home``, ``item_bucketed``). Bucketed, one state per bucket,
            # RESERVE at the user's home (docs/design.md, "Buckets").
            bucketed = take.buckets > 1 and take.route is None and bucketed_states_allowed(take.group_id, take.buckets)
            ticket = take.ticket
            if ticket is not None and (bucketed or not ticket.spends_with(reservations.client)):
                # The states in another slot than the room's, or the room in another Redis: the
                # ticket is spent first, the rate limits counted with it (before its check, as
                # RESERVE counts them), not again by RESERVE.
                ticket.spend(take.rate, tag=group_tag(take.group_id))
                ticket, options["rate"] = None, None
            if bucketed:
                states = item_states(take.group_id, take.buckets)
                reserved = reserve_at_home(reservations, transfers_client(reservations), states, **options)
            else:
                reserved = reservations.reserve(group_id=take.group_id, ticket=ticket, **options)
        if reserved.refusal is None:
            if reserved.kick:
                state = take.group_id if take.buckets == 1 else reservation_group(reserved.reservation_id)
                _ask(DRAIN_TASK, (take.kind, take.item_id, state), "persist", take)
            if reserved.unconfirmed:
                raise Unconfirmed(public_of(reserved.reservation_id))
            try:
                return take.reserved(reserved)
            except Exception as exc:
                # Its answer unmade (a pool's prize read from a database out of reach): the
                # reservation stands, and a resend under the request's key must not make another.
                raise MadeUnanswered() from exc
        if reserved.refusal == "rate_limited":
            rate_refuse(reserved.wait_ms)
        if reserved.refusal == "not_admitted":
            raise TicketNotLive()
        if reserved.refusal == "limit":
            raise take.over_limit()
        if reserved.refusal == "cooling_down":
            raise CoolingDown(max(1, ceil(reserved.wait_ms / 1000)))
        if reserved.refusal == "unavailable":
            # The window the item was read with answers first, without a query: a sale ended
            # long ago has no state (``item_reservations_close``) and hears ``ended``, with no
            # rebuild asked for.
            take.window_check()
            if reservations.claim_rebuild(group_id=take.group_id):
                _ask(REBUILD_TASK, (take.kind, take.item_id), "rebuild", take)
            raise StateMissing()
        if reserved.refusal == "moved":  # the item was read before a rebucket: read it again
            raise StateMissing()
        raise _REFUSED[reserved.refusal]()

    def change(self, change: Change) -> bool:
        if not change.releases:
            with transaction.atomic():
                return change_write(change, guarded=True)

        def release() -> list[Returned]:
            with transaction.atomic():
                if change_write(change, guarded=True):
                    return [Returned(change.record_id, change.user_id, change.stock_id)]
            return []

        return bool(self.units_returned(change.group_id, release, kind=change.kind, frees_take=change.frees_take))

    def expire(self, expiry: Expiry) -> int:
        return self.units_returned(
            expiry.group_id, lambda: expiry_write(expiry), kind=expiry.kind, frees_take=expiry.frees_take
        )

    def units_returned(
        self, group_id: int, release: Callable[[], list[Returned]], *, kind: str, frees_take: bool
    ) -> int:
        """``release()`` (the database's release of some of the group's records, committed)
        and their units back in Redis, under the group's lock, which reconciliation holds
        to compare the two; the number released. ``LockBusy`` when the lock could not be
        had in ``LOCK_WAIT_SECONDS`` (nothing released). A release frees the user's take
        number 1: only a product of one take per user frees takes."""
        if transaction.get_connection().in_atomic_block:
            raise RuntimeError(
                "a redis_lua release commits before its unit goes back to Redis: call it outside atomic()"
            )

        def run() -> int:
            returned = release()
            units = Counter(one.stock_id for one in returned if one.stock_id is not None)
            freed = [one.user_id for one in returned] if frees_take else []
            # Each releasing user's abandoned holds as the database counts them, now committed.
            abandoned = abandoned_values(group_id, sorted({one.user_id for one in returned})) if returned else {}
            try:
                if returned:
                    with REACHABLE:
                        reservations = reservations_client()
                        # The layout the loaded state says (a bucketed item's states, or one).
                        layout = states_layout(reservations, group_id)
                        if layout > 1:
                            states_units_return(group_id, layout, reservations, units, freed, abandoned)
                        else:
                            reservations.units_return(
                                group_id=group_id, units=units, takes_freed=freed, abandoned=abandoned
                            )
            except Exception:  # Redis out of reach: reconciliation returns them from the database
                logger.warning("Could not return %d %s units to Redis; reconciliation will.", len(returned), kind)
            return len(returned)

        return with_group_lock(group_id, run, wait_seconds=settings.LOCK_WAIT_SECONDS)


def _ask(task: str, args: tuple, what: str, take: Take) -> None:
    try:
        current_app.send_task(task, args=args)
    except Exception:  # the broker down: the beat's sweep and reconciliation catch up
        logger.warning(
            "Could not ask a worker to %s %s %s; the periodic sweep will.", what, take.kind, take.item_id, exc_info=True
        )
