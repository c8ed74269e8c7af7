"""Draining a stock group's stream of reservations under the group's lock
(``inventory.redis_lua.persist`` writes each batch), and what else runs under that lock:
rebuilding, opening and retiring the group's Redis state; and the options of the tasks that
do so.

The lock is the one that a group's persisting and its state's rebuild share: a rebuild
reads the database's stock, which must not miss a batch about to commit.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.conf import settings
from django.db import DatabaseError

from core.namespace import key_prefix
from locking import Lock
from locking.integration import locks_redis
from locking.lease import LeasedLock

from ..errors import LockBusy
from .client import Reservations, reservations_client
from .persist import Persisted

R = TypeVar("R")


def consumer_name() -> str:
    """This worker process's name in the streams' consumer group."""
    return f"{socket.gethostname()}:{os.getpid()}"


def persist_options(*, holding_group_lock: bool = False) -> dict:
    """The options of ``reservations_persist`` for this process, from the settings. Under
    the group's lock (``holding_group_lock``) no other consumer is writing, so the entries
    another one was handed are taken over at once."""
    return {
        "reservations": reservations_client(),
        "consumer": consumer_name(),
        "claim_idle_ms": 0 if holding_group_lock else settings.RESERVATIONS_CLAIM_IDLE_MS,
        "give_up_seconds": settings.RESERVATIONS_GIVE_UP_SECONDS,
    }


def group_lock(group_id: int, **options) -> LeasedLock:
    """The lock that one stock group's persisting and its state's rebuild share: a rebuild
    reads the database's stock, which must not miss a batch about to commit. Options are
    ``locking.Lock``'s (``blocking``, ``blocking_timeout``)."""
    name = f"reservations:{group_id}"
    return Lock(locks_redis(), name, key_prefix=key_prefix(), lease=settings.LOCK_LEASE_SECONDS, **options)


# A drain that found its group's lock held tries again this often, this many times (the
# holder's lease runs out within LOCK_LEASE_SECONDS should it have died).
BUSY_RETRY_SECONDS = 0.25
BUSY_RETRIES = 240


def drain_group(
    group_id: int,
    step: Callable[[int], Persisted],
    *,
    reservations: Reservations,
    batch: int = 500,
    pace_seconds: float | None = None,
    stay_seconds: float = 5.0,
) -> int | None:
    """Call ``step(batch)`` (one ``reservations_persist`` of the group) under the group's
    lock until the stream is empty; the number handled. None at once when another worker
    holds the lock (the caller tries again shortly: the holder may have read its last
    batch already).

    While reservations keep arriving the drain stays, for up to ``stay_seconds``, reading
    every ``pace_seconds`` (``RESERVATIONS_KICK_MS`` by default: the pace at which a crowd
    asks for drains when none is there), with the group's kick flag held so that no request sends
    another task meanwhile: a crowd is written in batches of what arrives in a pace,
    not in a task of a few rows per request burst. Then it clears the flag and reads
    once more: a reservation that lands after that read finds the flag clear and asks
    for a drain of its own."""
    if pace_seconds is None:
        pace_seconds = settings.RESERVATIONS_KICK_MS / 1000
    lock = group_lock(group_id, blocking=False)
    if lock.acquire() is None:
        return None
    hold_ms = int((pace_seconds + 2) * 1000)  # a pace and a batch's writing, with room
    handled = 0
    with _held(lock):
        until = time.monotonic() + stay_seconds
        while True:
            reservations.hold_kick(group_id=group_id, ms=hold_ms)
            done = step(batch)
            handled += done.handled
            if done.handled == batch:
                continue
            if done.handled and time.monotonic() < until:
                time.sleep(pace_seconds)
                continue
            reservations.rearm(group_id=group_id)
            return handled + persist_all(step, batch=batch)


def persist_all(step: Callable[[int], Persisted], *, batch: int = 500) -> int:
    """Call ``step(batch)`` (one ``reservations_persist``) until a call finds fewer than
    ``batch``; the number handled. The caller holds the group's lock."""
    handled = 0
    while True:
        done = step(batch)
        handled += done.handled
        if done.handled < batch:
            return handled


def group_rebuild(
    group_id: int,
    reservations: Reservations,
    *,
    step: Callable[[int], Persisted],
    load: Callable[[], bool],
    replace: bool,
    wait_seconds: float = 30,
) -> bool:
    """Under the group's lock: persist what waits in the stream (``step``, as in
    :func:`persist_all`), drop the state when ``replace``, then ``load()`` it from the
    database (loaded only where none is, or was just dropped); True when loaded."""

    def run() -> bool:
        persist_all(step)
        if replace:
            reservations.drop(group_id=group_id)
        return load()

    return with_group_lock(group_id, run, wait_seconds=wait_seconds)


def group_open(group_id: int, reservations: Reservations, *, load: Callable[[], bool]) -> bool:
    """Under the group's lock: forget whatever Redis holds for the group, then ``load()`` its
    state; for a group just created, which no reservation can have reached yet."""

    def run() -> bool:
        reservations.forget(group_id=group_id)
        return load()

    return with_group_lock(group_id, run, wait_seconds=30)


def group_retire(
    group_id: int,
    reservations: Reservations,
    *,
    step: Callable[[int], Persisted],
    then: Callable[[], R],
    wait_seconds: float = 30,
) -> R:
    """Under the group's lock: drop the state (reservations answer ``unavailable`` from now
    on), persist every reservation that waits, then ``then()`` (the switch to another
    strategy, committed before the lock is released, so that no rebuild slips in)."""

    def run() -> R:
        reservations.drop(group_id=group_id)
        persist_all(step)
        return then()

    return with_group_lock(group_id, run, wait_seconds=wait_seconds)


def with_group_lock(group_id: int, action: Callable[[], R], *, wait_seconds: float) -> R:
    """``action()`` under the group's lock, waited for up to ``wait_seconds``; raises
    ``LockBusy`` when it could not be had."""
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


def drain_task_run(task, group_id: int, persist: Callable[..., Persisted]) -> int:
    """The body of a drain task: ``persist(batch=..., **persist_options())`` until the
    group is drained; retried shortly when another worker holds the group."""
    options = persist_options()
    handled = drain_group(group_id, lambda batch: persist(batch=batch, **options), reservations=options["reservations"])
    if handled is None:
        raise task.retry(countdown=BUSY_RETRY_SECONDS, max_retries=BUSY_RETRIES)
    return handled
