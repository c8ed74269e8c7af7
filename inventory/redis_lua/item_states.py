"""An item's ``redis_lua`` state through its life, whatever its product (``inventory.product``):
loaded into Redis from the database, kept in step with the item's changes, reconciled,
and its reservations persisted as the product's records (``inventory.redis_lua.persist``).

Every function takes the product's adapter and one of its items; ``reservations`` is the
process's client (``inventory.redis_lua.client.reservations_client``) unless given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import transaction

from ..models import Stock, Strategy
from ..product import Product
from .bucket_states import item_states as item_states_of
from .bucket_states import states_present
from .client import Reservations, reservations_client
from .closing import item_closed, item_keeps_state
from .drain import persist_options, with_group_lock
from .item_buckets import (
    abandoned_values,
    item_bucketed,
    states_change,
    states_drop,
    states_forget,
    states_load_item,
    states_loaded,
    states_persist,
)
from .numbering import lost_floor_record, state_last_reservation
from .persist import Persisted, reservations_persist
from .reconcile import GroupCheck, group_check, group_reconcile
from .reconcile_buckets import states_check
from .records_insert import RecordsInsert
from .values import GroupKeys, Pending

R = TypeVar("R")
logger = logging.getLogger(__name__)


def item_reservations_persist(
    product: Product, *, item_id: int, group_id: int, reservations: Reservations, consumer: str, **options
) -> Persisted:
    """Write the item's pending reservations as records (held, where the item has a hold
    window), once each; ``options`` are those of
    ``inventory.redis_lua.persist.reservations_persist``. Ids only: nothing is read before
    the batch, so that a database out of reach reaches the code that gives up."""
    insert = RecordsInsert(product, item_id)
    return reservations_persist(
        group_id=group_id,
        reservations=reservations,
        consumer=consumer,
        persisted=lambda ids: _persisted(product, ids),
        prepare=insert.prepare,
        write=insert.write,
        kind=product.kind,
        item_id=item_id,
        **options,
    )


def _persisted(product: Product, ids: list[int]) -> set[int]:
    """Which of the reservations ``ids`` have their records (one query through the unique
    reservation column)."""
    return set(product.record_model.objects.filter(reservation__in=ids).values_list("reservation", flat=True))


def _group_stock(group_id: int) -> dict[int, int]:
    """The group's units per row, as the database holds them."""
    return dict(Stock.objects.filter(group_id=group_id).values_list("id", "quantity"))


def _load(product: Product, item: Any, reservations: Reservations) -> bool:
    """Load the state from the database if the item (read again: the caller holds the group's
    lock, and the strategy may have changed since) is still ``redis_lua``, and its sale is
    not closed (``inventory.redis_lua.closing``): loaded, it would stay for good."""
    item = product.items().get(pk=item.pk)
    if not item_keeps_state(item):
        return False
    if (buckets := item_bucketed(product, item)) > 1:
        return states_load_item(product, item, buckets, reservations)
    records = product.taking(product.records(item.pk))
    takers, numbers = product.takes(records)
    seqs: dict[int, list[int]] = {}
    for user_id, seq in numbers:
        seqs.setdefault(user_id, []).append(seq)
    return reservations.load(
        group_id=product.group_of(item),
        rules=product.rules(item),
        stock=_group_stock(product.group_of(item)),
        takers=takers,
        seqs=seqs,
        last_reservation=state_last_reservation(product, product.group_of(item)),
        lost_floor=lost_floor_record,
        abandoned=abandoned_values(product.group_of(item)),
    )


def _persist_step(product: Product, item: Any) -> Callable[[int, int], Persisted]:
    """One batch of one of the item's states' streams (``step(state, batch)``)."""
    options = persist_options(holding_group_lock=True)
    return lambda state, batch: item_reservations_persist(
        product, item_id=item.pk, group_id=state, batch=batch, **options
    )


def _rebuild(
    product: Product, item: Any, reservations: Reservations | None, *, replace: bool, wait_seconds: float = 30
) -> bool:
    """Under the group's lock: drop the item's states when ``replace``, or when a bucketed
    item has lost some of them (its states are loaded all together), then persist what waits
    in every stream, then load them from the database (loaded only where none is, or was
    just dropped); True when loaded. Dropped first, the states sell nothing more while their
    streams are persisted: states left loaded went on selling between the persisting and the
    load, whose streams then held reservations the database did not (``PendingReservations``)."""
    reservations = reservations or reservations_client()
    group_id = product.group_of(item)

    def run() -> bool:
        buckets = item_bucketed(product, item)
        if replace or (buckets > 1 and not states_loaded(group_id, buckets, reservations)):
            states_drop(group_id, reservations)
        states_persist(group_id, reservations, _persist_step(product, item))
        return _load(product, item, reservations)

    return with_group_lock(group_id, run, wait_seconds=wait_seconds)


def item_reservations_load(
    product: Product, *, item: Any, reservations: Reservations | None = None, wait_seconds: float = 30
) -> bool:
    """Load the item's state into Redis from the database (its rules, its group's stock, each
    user's takes and the last reservation written), unless a state is there already or the
    item is not ``redis_lua``: True when loaded. Reservations waiting in the stream are
    persisted first.

    Holds the group's lock (``inventory.redis_lua.drain.group_lock``) while it reads, so that
    a batch being persisted commits first; raises ``LockBusy`` when it waits longer than
    ``wait_seconds``.
    """
    return _rebuild(product, item, reservations, replace=False, wait_seconds=wait_seconds)


def item_reservations_start(product: Product, *, item: Any, reservations: Reservations | None = None) -> bool:
    """The item has just become ``redis_lua``: its state is built afresh from the database (a
    state left from an earlier spell is dropped, once whatever waited in its stream is
    persisted)."""
    return _rebuild(product, item, reservations, replace=True)


def item_reservations_open(product: Product, *, item: Any, reservations: Reservations | None = None) -> bool:
    """The item was just created under ``redis_lua``: its state is loaded, and any key Redis
    still holds for a group of the same id is forgotten (a stale copy)."""
    reservations = reservations or reservations_client()
    group_id = product.group_of(item)

    def run() -> bool:
        states_forget(group_id, reservations)
        return _load(product, item, reservations)

    return with_group_lock(group_id, run, wait_seconds=30)


def item_reservations_retire(
    product: Product, *, item: Any, then: Callable[[], R], reservations: Reservations | None = None
) -> R:
    """The item leaves ``redis_lua``: its state is dropped, every waiting reservation is
    persisted, and ``then()`` (the switch) commits, all under the group's lock."""
    reservations = reservations or reservations_client()
    group_id = product.group_of(item)

    def run() -> R:
        states_drop(group_id, reservations)
        states_persist(group_id, reservations, _persist_step(product, item))
        return then()

    return with_group_lock(group_id, run, wait_seconds=30)


def item_reservations_close(
    product: Product, *, item: Any, reservations: Reservations | None = None, thorough: bool = False
) -> bool:
    """The item's sale ended long ago (``inventory.redis_lua.closing``): every reservation still
    waiting is persisted, then every key its states hold in Redis is removed (its failed
    reservations, found by their ids until now, too), whatever the item's strategy now (one that
    left ``redis_lua`` kept its counter, its failed reservations and its empty stream). True
    when there was anything to remove; one round trip when there was not (``thorough``: the
    other 63 states' keys looked for too, as a command does). After it a take hears ``ended``
    from the item's window, with no rebuild, and a release gives its unit back to the
    database alone. Nothing is removed while a reservation still waits (a replica that did
    not confirm a batch holds it back): the next close tries again."""
    reservations = reservations or reservations_client()
    group_id = product.group_of(item)
    # Bucket 0's keys are removed last (``states_forget``): none left, nothing is left, but
    # of an item of several states whose first load stopped before bucket 0's.
    if not reservations.client.exists(*GroupKeys.of(group_id).all()):
        several = thorough or getattr(item, "buckets", 1) > 1
        if not several or not states_present(reservations, group_id, every_key=True):
            return False

    def run() -> bool:
        now = product.items().get(pk=item.pk)  # as it stands under the lock: staff may have moved its end
        if not item_closed(now):
            return False
        states_drop(group_id, reservations)
        states_persist(group_id, reservations, _persist_step(product, now))
        states = [group_id, *states_present(reservations, group_id)]
        if any(reservations.waiting(group_id=state) for state in states):
            logger.warning("%s %s: reservations still wait to be written; its close is put off.", product.kind, now.pk)
            return False
        states_forget(group_id, reservations)
        return True

    return with_group_lock(group_id, run, wait_seconds=30)


def item_reservations_change(
    product: Product,
    *,
    item: Any,
    change: Callable[[], R],
    units: Callable[[R], dict[int, int]] = lambda done: {},
    reservations: Reservations | None = None,
) -> R:
    """Apply ``change()`` (a database write that commits) and the same change to the loaded
    state (the rules; ``units(done)``: units added per stock row, a new row's included), under
    the group's lock so that no rebuild reads the database between the two and counts the
    units twice."""
    reservations = reservations or reservations_client()
    group_id = product.group_of(item)

    def run() -> R:
        done = change()
        now = product.items().get(pk=item.pk)
        if (buckets := item_bucketed(product, now)) > 1:
            states_change(group_id, buckets, reservations, product.rules(now), units(done))
            return done
        reservations.set_rules(group_id=group_id, rules=product.rules(now))
        for stock_id, added in units(done).items():
            reservations.add_units(group_id=group_id, stock_id=stock_id, units=added)
        return done

    return with_group_lock(group_id, run, wait_seconds=30)


def item_reservations_check(
    product: Product,
    *,
    item: Any,
    reservations: Reservations | None = None,
    repair: bool = False,
    totals_first: bool = False,
) -> GroupCheck:
    """The item's Redis state against the database (``inventory.redis_lua.reconcile``),
    repaired with ``repair``; with ``totals_first``, each user compared only when the totals
    differ (or the last such comparison is old)."""
    group_id = product.group_of(item)
    reservations = reservations or reservations_client()
    records = product.taking(product.records(item.pk))
    buckets = item_bucketed(product, item)
    states = item_states_of(group_id, buckets) if buckets > 1 else [group_id]
    common = {
        "reservations": reservations,
        "database_stock": lambda: _group_stock(group_id),
        "database_takes": lambda: product.takes(records),
        "database_takes_total": records.count,
        "repair": repair,
        "totals_first": totals_first,
        "database_abandoned": lambda: abandoned_values(group_id),
        "written_acknowledged": lambda: _written_acknowledged(product, states, reservations),
    }
    if buckets > 1:
        rows = Stock.objects.filter(group_id=group_id).values_list("id", "bucket")
        row_buckets = lambda: {row: bucket % buckets for row, bucket in rows}  # noqa: E731
        return states_check(group_id=group_id, states=states, row_buckets=row_buckets, **common)
    return group_check(group_id=group_id, **common)


def _written_acknowledged(product: Product, states: list[int], reservations: Reservations) -> None:
    """Acknowledge the entries of the states' streams whose records the database holds. A
    drain that stopped between its commit and its acknowledgement (killed, its Redis out of
    reach a moment) left them there until another consumer claimed them: counted as pending
    beside their records, they read as drift, and a repair withheld their units meanwhile.
    Called under the group's lock held exclusive, when no drain is between the two; one
    indexed query a state whose stream holds entries, none for an empty one."""
    for state in states:
        entries = reservations.client.xrange(GroupKeys.of(state).pending)
        pending = {one.reservation_id: one for one in (Pending.from_entry(state, *entry) for entry in entries)}
        ids = list(pending)
        found = set().union(*(_persisted(product, ids[at : at + 1000]) for at in range(0, len(ids), 1000)))
        reservations.done(group_id=state, pending=[pending[one] for one in found])


def item_reservations_reconcile(
    product: Product, *, item: Any, reservations: Reservations | None = None, totals_first: bool = False
) -> GroupCheck:
    """Check and repair the item's state (``totals_first``: as ``item_reservations_check``);
    rebuild it from the database when it is missing and the item is ``redis_lua`` (and not
    closed: ``item_closed``)."""
    reservations = reservations or reservations_client()
    return group_reconcile(
        check=lambda: item_reservations_check(
            product, item=item, reservations=reservations, repair=True, totals_first=totals_first
        ),
        rebuild=lambda: item_reservations_load(product, item=item, reservations=reservations),
        live=item_keeps_state(item),
    )


def item_created(product: Product, item: Any) -> None:
    """The item was just created (in the caller's transaction): under ``redis_lua`` its state
    is opened once that commits."""
    if item.strategy == Strategy.REDIS_LUA:
        transaction.on_commit(lambda: item_reservations_open(product, item=item))


def item_update(
    product: Product,
    item: Any,
    change: Callable[[], R],
    *,
    switch_to: str | None = None,
    units: Callable[[R], dict[int, int]] | None = None,
    rows_moved: bool = False,
) -> R:
    """``change()`` (database writes that commit), with the item's Redis state in step when the
    item is or becomes ``redis_lua``: a switch to it builds the state from the database, a
    switch away persists what waits and drops the state, and new rules or units (``units(done)``:
    added per stock row) are applied to the state too. ``switch_to`` is the new strategy, if any.

    ``rows_moved``: the change moves units between rows (a voucher split into another number
    of buckets), computed from the database's stock, which counts no reservation still in the
    stream: the state is retired (every waiting reservation persisted) before the change and
    built again from the database after it, as a switch away and back would."""
    was = product.item_model.objects.values_list("strategy", flat=True).get(pk=item.pk)
    now = switch_to or was
    reservations = reservations_client()
    if was == Strategy.REDIS_LUA and (now != Strategy.REDIS_LUA or rows_moved):
        done = item_reservations_retire(product, item=item, then=change, reservations=reservations)
        if now == Strategy.REDIS_LUA:
            item_reservations_start(product, item=item, reservations=reservations)
        return done
    if was == Strategy.REDIS_LUA:
        return item_reservations_change(
            product, item=item, change=change, units=units or (lambda done: {}), reservations=reservations
        )
    done = change()
    if now == Strategy.REDIS_LUA:
        item_reservations_start(product, item=item, reservations=reservations)
    return done
