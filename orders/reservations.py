"""The flash sale's ``redis_lua`` state: loaded into Redis from the database, kept in step
with the voucher's changes, reconciled, and reservations persisted as orders
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

from .models import Order, Voucher

R = TypeVar("R")


def voucher_reservations_persist(
    *, voucher_id: int, group_id: int, reservations: Reservations, consumer: str, **options
) -> Persisted:
    """Write the voucher's pending reservations as confirmed orders, once each; ``options``
    are those of ``inventory.persist.reservations_persist``. Ids only: nothing is read
    before the batch, so that a database out of reach reaches the code that gives up."""

    def persisted(ids: list[int]) -> set[int]:
        return set(Order.objects.filter(reservation__in=ids).values_list("reservation", flat=True))

    def write(fresh: list[Pending]) -> None:
        Order.objects.bulk_create(
            Order(
                user_id=one.user_id,
                voucher_id=voucher_id,
                status=Order.Status.CONFIRMED,
                # Written through the one-per-user backstop, as every safe strategy does.
                buyer_guard=one.user_id,
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
        kind="voucher",
        item_id=voucher_id,
        **options,
    )


def _rules(voucher: Voucher) -> Rules:
    return Rules(begin_at=voucher.begin_at, end_at=voucher.end_at, limit=1)


def _load(voucher: Voucher, reservations: Reservations) -> bool:
    """Load the state from the database if the voucher (read again: the caller holds the
    group's lock, and the strategy may have changed since) is still ``redis_lua``."""
    voucher = Voucher.objects.select_related("stock").get(pk=voucher.pk)
    if voucher.strategy != Strategy.REDIS_LUA:
        return False
    orders = Order.objects.filter(voucher_id=voucher.pk)
    return reservations.load(
        group_id=voucher.stock.group_id,
        rules=_rules(voucher),
        stock={voucher.stock_id: voucher.stock.quantity},
        takers=takes_by_user(orders),
        last_reservation=orders.aggregate(last=Max("reservation"))["last"] or 0,
    )


def _persist_step(voucher: Voucher) -> Callable[[int], Persisted]:
    options = persist_options(holding_group_lock=True)
    ids = {"voucher_id": voucher.pk, "group_id": voucher.stock.group_id}
    return lambda batch: voucher_reservations_persist(**ids, batch=batch, **options)


def voucher_reservations_load(*, voucher: Voucher, reservations: Reservations, wait_seconds: float = 30) -> bool:
    """Load the voucher's state into Redis from the database (its window, stock, buyers and
    the last reservation written), unless a state is there already or the voucher is not
    ``redis_lua``: True when loaded. Reservations waiting in the stream are persisted first.

    Holds the group's lock (``inventory.persist.group_lock``) while it reads, so that a
    batch being persisted commits first; raises ``LockBusy`` when it waits longer than
    ``wait_seconds``.
    """
    return group_rebuild(
        voucher.stock.group_id,
        reservations,
        step=_persist_step(voucher),
        load=partial(_load, voucher, reservations),
        replace=False,
        wait_seconds=wait_seconds,
    )


def voucher_reservations_start(*, voucher: Voucher, reservations: Reservations) -> bool:
    """The voucher has just become ``redis_lua``: its state is built afresh from the
    database (a state left from an earlier spell is dropped, once whatever waited in its
    stream is persisted)."""
    return group_rebuild(
        voucher.stock.group_id,
        reservations,
        step=_persist_step(voucher),
        load=partial(_load, voucher, reservations),
        replace=True,
    )


def voucher_reservations_open(*, voucher: Voucher, reservations: Reservations) -> bool:
    """The voucher was just created under ``redis_lua``: its state is loaded, and any key
    Redis still holds for a group of the same id is forgotten (a stale copy)."""
    return group_open(voucher.stock.group_id, reservations, load=partial(_load, voucher, reservations))


def voucher_reservations_retire(*, voucher: Voucher, reservations: Reservations, then: Callable[[], R]) -> R:
    """The voucher leaves ``redis_lua``: its state is dropped, every waiting reservation is
    persisted, and ``then()`` (the switch) commits, all under the group's lock."""
    return group_retire(voucher.stock.group_id, reservations, step=_persist_step(voucher), then=then)


def voucher_reservations_change(
    *, voucher: Voucher, reservations: Reservations, change: Callable[[], R], restock: int = 0
) -> R:
    """Apply ``change()`` (a database write that commits) and the same change to the loaded
    state (the window; ``restock`` more units), under the group's lock so that no rebuild
    reads the database between the two and counts the units twice."""

    def run() -> R:
        done = change()
        fresh = Voucher.objects.get(pk=voucher.pk)
        reservations.set_rules(group_id=voucher.stock.group_id, rules=_rules(fresh))
        if restock:
            reservations.add_units(group_id=voucher.stock.group_id, stock_id=voucher.stock_id, units=restock)
        return done

    return with_group_lock(voucher.stock.group_id, run, wait_seconds=30)


def voucher_reservations_check(*, voucher: Voucher, reservations: Reservations, repair: bool = False) -> GroupCheck:
    """The voucher's Redis state against the database (``inventory.reconcile``), repaired
    with ``repair``."""
    return group_check(
        group_id=voucher.stock.group_id,
        reservations=reservations,
        database_stock=lambda: dict(Stock.objects.filter(pk=voucher.stock_id).values_list("id", "quantity")),
        database_takers=lambda: takes_by_user(Order.objects.filter(voucher_id=voucher.pk)),
        # A buyer's one order is their take number 1.
        database_seqs=lambda: [(user_id, 1) for user_id in _buyers(voucher)],
        repair=repair,
    )


def voucher_reservations_reconcile(*, voucher: Voucher, reservations: Reservations) -> GroupCheck:
    """Check and repair the voucher's state; rebuild it from the database when it is missing
    and the voucher is ``redis_lua``."""
    return group_reconcile(
        check=lambda: voucher_reservations_check(voucher=voucher, reservations=reservations, repair=True),
        rebuild=lambda: voucher_reservations_load(voucher=voucher, reservations=reservations),
        live=voucher.strategy == Strategy.REDIS_LUA,
    )


def _buyers(voucher: Voucher) -> set[int]:
    return set(Order.objects.filter(voucher_id=voucher.pk).values_list("user_id", flat=True))
