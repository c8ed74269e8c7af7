"""The prize draw's ``redis_lua`` state: loaded into Redis from the database, kept in step
with the pool's changes, reconciled, and reservations persisted as draws
(``inventory.persist``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

from django.db.models import Max

from inventory.groups import group_open, group_rebuild, group_retire, persist_options, with_group_lock
from inventory.models import Stock, Strategy
from inventory.persist import Persisted, reservations_persist
from inventory.reconcile import GroupCheck, group_check, group_reconcile, takes_by_user
from inventory.reservations import Pending, Reservations, Rules

from .models import Draw, Pool, Prize

R = TypeVar("R")


def pool_reservations_persist(
    *, pool_id: int, group_id: int, reservations: Reservations, consumer: str, **options
) -> Persisted:
    """Write the pool's pending reservations as confirmed draws (a prize, or none), once
    each; ``options`` are those of ``inventory.persist.reservations_persist``. Ids only:
    nothing is read before the batch, so that a database out of reach reaches the code
    that gives up."""

    def persisted(ids: list[int]) -> set[int]:
        return set(Draw.objects.filter(reservation__in=ids).values_list("reservation", flat=True))

    def write(fresh: list[Pending]) -> None:
        prize_of = dict(Prize.objects.filter(pool_id=pool_id).values_list("stock_id", "id"))
        Draw.objects.bulk_create(
            Draw(
                user_id=one.user_id,
                pool_id=pool_id,
                prize_id=None if one.stock_id is None else prize_of[one.stock_id],
                status=Draw.Status.CONFIRMED,
                # The script's count of the user's takes: with user_guard, the limit's backstop.
                seq=one.seq,
                user_guard=one.user_id,
                reservation=one.reservation_id,
            )
            for one in fresh
        )

    return reservations_persist(
        group_id=group_id,
        reservations=reservations,
        consumer=consumer,
        persisted=persisted,
        write=write,
        kind="pool",
        item_id=pool_id,
        **options,
    )


def _rules(pool: Pool) -> Rules:
    return Rules(begin_at=pool.begin_at, end_at=pool.end_at, limit=pool.draws_per_user, no_take=pool.no_prize_weight)


def _load(pool: Pool, reservations: Reservations) -> bool:
    """Load the state from the database if the pool (read again: the caller holds the
    group's lock, and the strategy may have changed since) is still ``redis_lua``."""
    pool = Pool.objects.get(pk=pool.pk)
    if pool.strategy != Strategy.REDIS_LUA:
        return False
    draws = Draw.objects.filter(pool_id=pool.pk)
    seqs: dict[int, list[int]] = {}
    for user_id, seq in draws.values_list("user_id", "seq"):
        seqs.setdefault(user_id, []).append(seq)
    return reservations.load(
        group_id=pool.group_id,
        rules=_rules(pool),
        stock=dict(Stock.objects.filter(group_id=pool.group_id).values_list("id", "quantity")),
        takers=takes_by_user(draws),
        seqs=seqs,
        last_reservation=draws.aggregate(last=Max("reservation"))["last"] or 0,
    )


def _persist_step(pool: Pool) -> Callable[[int], Persisted]:
    options = persist_options(holding_group_lock=True)
    return lambda batch: pool_reservations_persist(pool_id=pool.pk, group_id=pool.group_id, batch=batch, **options)


def pool_reservations_load(*, pool: Pool, reservations: Reservations, wait_seconds: float = 30) -> bool:
    """Load the pool's state into Redis from the database (its window, draw limit, weight of
    no prize, every prize's stock, each user's draws and the last reservation written),
    unless a state is there already or the pool is not ``redis_lua``: True when loaded.
    Reservations waiting in the stream are persisted first.

    Holds the group's lock (``inventory.persist.group_lock``) while it reads, so that a
    batch being persisted commits first; raises ``LockBusy`` when it waits longer than
    ``wait_seconds``.
    """
    return group_rebuild(
        pool.group_id,
        reservations,
        step=_persist_step(pool),
        load=partial(_load, pool, reservations),
        replace=False,
        wait_seconds=wait_seconds,
    )


def pool_reservations_start(*, pool: Pool, reservations: Reservations) -> bool:
    """The pool has just become ``redis_lua``: its state is built afresh from the database
    (a state left from an earlier spell is dropped, once whatever waited in its stream is
    persisted)."""
    return group_rebuild(
        pool.group_id, reservations, step=_persist_step(pool), load=partial(_load, pool, reservations), replace=True
    )


def pool_reservations_open(*, pool: Pool, reservations: Reservations) -> bool:
    """The pool was just created under ``redis_lua``: its state is loaded, and any key
    Redis still holds for a group of the same id is forgotten (a stale copy)."""
    return group_open(pool.group_id, reservations, load=partial(_load, pool, reservations))


def pool_reservations_retire(*, pool: Pool, reservations: Reservations, then: Callable[[], R]) -> R:
    """The pool leaves ``redis_lua``: its state is dropped, every waiting reservation is
    persisted, and ``then()`` (the switch) commits, all under the group's lock."""
    return group_retire(pool.group_id, reservations, step=_persist_step(pool), then=then)


def pool_reservations_change(
    *,
    pool: Pool,
    reservations: Reservations,
    change: Callable[[], R],
    units: Callable[[R], dict[int, int]] = lambda done: {},
) -> R:
    """Apply ``change()`` (a database write that commits) and the same change to the loaded
    state (the rules; ``units(done)``: units added per stock row, a new prize's included),
    under the group's lock so that no rebuild reads the database between the two and
    counts the units twice."""

    def run() -> R:
        done = change()
        reservations.set_rules(group_id=pool.group_id, rules=_rules(Pool.objects.get(pk=pool.pk)))
        for stock_id, added in units(done).items():
            reservations.add_units(group_id=pool.group_id, stock_id=stock_id, units=added)
        return done

    return with_group_lock(pool.group_id, run, wait_seconds=30)


def pool_reservations_check(*, pool: Pool, reservations: Reservations, repair: bool = False) -> GroupCheck:
    """The pool's Redis state against the database (``inventory.reconcile``), repaired with
    ``repair``."""
    return group_check(
        group_id=pool.group_id,
        reservations=reservations,
        database_stock=lambda: dict(Stock.objects.filter(group_id=pool.group_id).values_list("id", "quantity")),
        database_takers=lambda: takes_by_user(Draw.objects.filter(pool_id=pool.pk)),
        database_seqs=lambda: Draw.objects.filter(pool_id=pool.pk).values_list("user_id", "seq"),
        repair=repair,
    )


def pool_reservations_reconcile(*, pool: Pool, reservations: Reservations) -> GroupCheck:
    """Check and repair the pool's state; rebuild it from the database when it is missing and
    the pool is ``redis_lua``."""
    return group_reconcile(
        check=lambda: pool_reservations_check(pool=pool, reservations=reservations, repair=True),
        rebuild=lambda: pool_reservations_load(pool=pool, reservations=reservations),
        live=pool.strategy == Strategy.REDIS_LUA,
    )
