"""Draining a stock group's stream of reservations under the group's lock
(``inventory.redis_lua.persist`` writes each batch), the lock itself, which the rebuild,
opening and retirement of an item's states also take (``inventory.redis_lua.item_states``),
and the options of the tasks that run them.

The lock is a read-write lock (``locking.shared``, ``locking.exclusive``): up to
``RESERVATIONS_PERSIST_CONSUMERS`` drains hold it shared and write the group at once (the
stream's consumer group hands each entry to one of them), while a rebuild, an open, a
retire, a reconciliation, a staff change and a release hold it exclusive: they read or write
the database's stock and Redis' apart, and must see no batch between its commit and its
acknowledgement.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar

from django.conf import settings
from django.db import DatabaseError
from redis.exceptions import RedisError

from core.namespace import key_prefix
from locking import ExclusiveLock, SharedLock
from locking.integration import locks_redis
from locking.lease import LeasedLock

from ..errors import LockBusy
from .bucket_states import busiest_state
from .client import Reservations, reservations_client
from .consumers import consumer_leave, consumer_name
from .persist import Persisted
from .values import state_of

logger = logging.getLogger(__name__)

R = TypeVar("R")


def persist_options(*, holding_group_lock: bool = False) -> dict:
    """The options of ``reservations_persist`` for this process, from the settings. Under
    the group's exclusive lock (``holding_group_lock``) no other consumer is writing, so the
    entries another one was handed are taken over at once; a drain, one of several, takes
    over only those left idle ``RESERVATIONS_CLAIM_IDLE_MS`` (their consumer died), never
    those another drain is writing."""
    return {
        "reservations": reservations_client(),
        "consumer": consumer_name(),
        "claim_idle_ms": 0 if holding_group_lock else settings.RESERVATIONS_CLAIM_IDLE_MS,
        "give_up_seconds": settings.RESERVATIONS_GIVE_UP_SECONDS,
    }


def _lock_name(group_id: int) -> str:
    # A bucket's state (``values.state_id``) is locked as its group: a drain of one bucket's
    # stream shares the lock that a rebuild of all the item's states holds exclusive.
    return f"reservations:{state_of(group_id)[0]}"


def group_lock(group_id: int, **options) -> LeasedLock:
    """The group's lock held exclusive: by a rebuild, an open, a retire, a reconciliation, a
    staff change and a release, which read or write the database's stock and Redis' apart
    and must not see a batch between its commit and its acknowledgement. Options are
    ``locking.ExclusiveLock``'s (``blocking``, ``blocking_timeout``)."""
    lease = settings.LOCK_LEASE_SECONDS
    return ExclusiveLock(locks_redis(), _lock_name(group_id), key_prefix=key_prefix(), lease=lease, **options)


def group_share(group_id: int, **options) -> SharedLock:
    """The group's lock held shared, by one of up to ``RESERVATIONS_PERSIST_CONSUMERS``
    drains at once. Options are ``locking.SharedLock``'s."""
    limit = settings.RESERVATIONS_PERSIST_CONSUMERS
    return SharedLock(
        locks_redis(), _lock_name(group_id), limit=limit, key_prefix=key_prefix(), lease=settings.LOCK_LEASE_SECONDS,
        **options,
    )  # fmt: skip


# A drain that found its group's lock held tries again this often, this many times (the
# holder's lease runs out within LOCK_LEASE_SECONDS should it have died).
BUSY_RETRY_SECONDS = 0.25
BUSY_RETRIES = 240
# A drain reading full batch after full batch leaves after this long, well within its task's
# soft time limit (60 s), whose exception would land anywhere in a batch.
FULL_BATCHES_SECONDS = 30


def drain_group(
    group_id: int,
    step: Callable[[int], Persisted],
    *,
    reservations: Reservations,
    batch: int = 500,
    pace_seconds: float | None = None,
    stay_seconds: float = 5.0,
    more: Callable[[], None] | None = None,
) -> int | None:
    """Call ``step(batch)`` (one ``reservations_persist`` of the group) under the group's
    lock, held shared, until the stream is empty; the number handled. None at once when the
    lock cannot be had (``RESERVATIONS_PERSIST_CONSUMERS`` drains hold it, or a rebuild holds
    or waits for it): the caller tries again shortly, since a holder may have read its last
    batch already.

    While reservations keep arriving the drain stays, for up to ``stay_seconds``, reading
    every ``pace_seconds`` (``RESERVATIONS_KICK_MS`` by default: the pace at which a crowd
    asks for drains when none is there), with the group's kick flag held so that no request sends
    another task meanwhile: a crowd is written in batches of what arrives in a pace,
    not in a task of a few rows per request burst. Then it clears the flag and reads
    once more: a reservation that lands after that read finds the flag clear and asks
    for a drain of its own. A drain leaves its stay early when an exclusive caller waits
    (it has the rest to persist itself).

    ``more()`` asks for one more drain: called once, at the first full batch (more wait than
    one batch holds) while fewer drains than the limit hold the lock, so that a busy group
    gets up to ``RESERVATIONS_PERSIST_CONSUMERS`` drains, each asking for the next, and a
    quiet one a single drain, one task at a time."""
    if pace_seconds is None:
        pace_seconds = settings.RESERVATIONS_KICK_MS / 1000
    lock = group_share(group_id, blocking=False)
    if lock.acquire() is None:
        return None
    hold_ms = int((pace_seconds + 2) * 1000)  # a pace and a batch's writing, with room
    handled = 0
    with _held(lock):
        until = time.monotonic() + stay_seconds
        leave_at = time.monotonic() + FULL_BATCHES_SECONDS
        while True:
            reservations.hold_kick(group_id=group_id, ms=hold_ms)
            done = step(batch)
            handled += done.handled
            if done.handled == batch:
                if lock.holders()[1] or time.monotonic() > leave_at:
                    # A release or a rebuild waits for the lock (crowds fill batch after batch,
                    # and its buyers' cancels answered busy), or the task nears its time limit:
                    # the rest to the next drain, a reservation's ask or the sweep's.
                    reservations.rearm(group_id=group_id)
                    return handled
                if more is not None and _room_for_another(lock):
                    _ask_quietly(more, group_id)
                    more = None
                continue
            if done.handled and time.monotonic() < until and not lock.holders()[1]:
                time.sleep(pace_seconds)
                continue
            reservations.rearm(group_id=group_id)
            return handled + persist_all(step, batch=batch)


def _room_for_another(lock: SharedLock) -> bool:
    holders, exclusive = lock.holders()
    return holders < lock.limit and not exclusive


def _ask_quietly(more: Callable[[], None], group_id: int) -> None:
    try:
        more()
    except Exception:  # the broker down: the drains there still write everything
        logger.warning("Could not ask for one more drain of group %s.", group_id, exc_info=True)


def persist_all(step: Callable[[int], Persisted], *, batch: int = 500) -> int:
    """Call ``step(batch)`` (one ``reservations_persist``) until a call finds fewer than
    ``batch``; the number handled. The caller holds the group's lock."""
    handled = 0
    while True:
        done = step(batch)
        handled += done.handled
        if done.handled < batch:
            return handled


def with_group_lock(group_id: int, action: Callable[[], R], *, wait_seconds: float) -> R:
    """``action()`` under the group's lock held exclusive (every drain has left, and none
    starts meanwhile), waited for up to ``wait_seconds``; raises ``LockBusy`` when it could
    not be had."""
    lock = group_lock(group_id, blocking_timeout=wait_seconds)
    if lock.acquire() is None:
        raise LockBusy("The reservations of this item are being persisted; try again.")
    with _held(lock):
        return action()


@contextmanager
def _held(lock: LeasedLock) -> Iterator[None]:
    try:
        yield
    finally:
        lock.release()


# The options of both products' drain tasks.
DRAIN_TASK_OPTIONS = {
    "bind": True,
    # Acknowledged after it ran, and redelivered if its worker died: every reservation it
    # took is then taken over by the next consumer and written once.
    "acks_late": True,
    "reject_on_worker_lost": True,
    # The database unreachable: try again later, backing off (the reservations wait in
    # Redis meanwhile).
    "autoretry_for": (DatabaseError,),
    "retry_backoff": True,
    "max_retries": 5,
    "soft_time_limit": 60,
    "time_limit": 90,
}


# The options of the periodic and on-demand tasks that keep Redis true to the database:
# late acknowledgement as for draining, no retry (the next beat runs them again).
TEND_TASK_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "soft_time_limit": 120,
    "time_limit": 150,
}


def drain_task_run(task, group_id: int, persist: Callable[..., Persisted], *, helper: bool = False) -> int:
    """The body of a drain task: ``persist(batch=..., **persist_options())`` until the
    group is drained; retried shortly when the lock cannot be had. A ``helper`` (a drain
    asked for by another at a full batch, of the item's busiest stream:
    ``bucket_states.busiest_state``) that finds no room just ends: the drains there write
    everything."""
    options = persist_options()

    def more() -> None:
        # The task's last argument is the state whose stream it drains: the helper takes the
        # item's busiest stream, this one or another bucket's.
        *item, _ = task.request.args
        task.apply_async(args=(*item, busiest_state(options["reservations"], group_id)), kwargs={"helper": True})

    try:
        handled = drain_group(
            group_id, lambda batch: persist(batch=batch, **options), reservations=options["reservations"], more=more
        )
    finally:
        # Not in the way of the drain's own outcome (a DatabaseError it retries on): a
        # consumer left in the group holds nothing, and the next drain of this process leaves.
        with suppress(RedisError):
            consumer_leave(options["reservations"].client, group_id, options["consumer"])
    if handled is None:
        if helper:
            return 0
        raise task.retry(countdown=BUSY_RETRY_SECONDS, max_retries=BUSY_RETRIES)
    return handled
