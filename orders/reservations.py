"""The flash sale's ``redis_lua`` state: loaded into Redis from the database, and reservations
persisted as orders (``inventory.persist``)."""

from __future__ import annotations

from django.db.models import Count, Max

from inventory.models import Stock
from inventory.persist import Persisted, reservations_persist, with_group_lock
from inventory.reconcile import GroupCheck, group_check
from inventory.reservations import Pending, Reservations, Rules

from .models import Order, Voucher


def voucher_reservations_persist(
    *, voucher: Voucher, reservations: Reservations, consumer: str, **options
) -> Persisted:
    """Write the voucher's pending reservations as confirmed orders, once each; ``options``
    are those of ``inventory.persist.reservations_persist``."""

    def persisted(ids: list[int]) -> set[int]:
        return set(Order.objects.filter(reservation__in=ids).values_list("reservation", flat=True))

    def write(fresh: list[Pending]) -> None:
        Order.objects.bulk_create(
            Order(
                user_id=one.user_id,
                voucher_id=voucher.pk,
                status=Order.Status.CONFIRMED,
                # Written through the one-per-user backstop, as every safe strategy does.
                buyer_guard=one.user_id,
                reservation=one.reservation_id,
            )
            for one in fresh
        )

    return reservations_persist(
        group_id=voucher.stock.group_id,
        reservations=reservations,
        consumer=consumer,
        persisted=persisted,
        write=write,
        **options,
    )


def voucher_reservations_load(*, voucher: Voucher, reservations: Reservations, wait_seconds: float = 30) -> bool:
    """Load the voucher's state into Redis from the database (its window, stock, buyers and
    the last reservation written), unless a state is there already: True when loaded.

    Holds the group's lock (``inventory.persist.group_lock``) while it reads, so that a
    batch being persisted commits first; raises ``LockBusy`` when it waits longer than
    ``wait_seconds``.
    """

    def load() -> bool:
        orders = Order.objects.filter(voucher_id=voucher.pk)
        buyers = _count_by_user(orders)
        stock = Stock.objects.get(pk=voucher.stock_id)
        return reservations.load(
            group_id=stock.group_id,
            rules=Rules(begin_at=voucher.begin_at, end_at=voucher.end_at, limit=1),
            stock={stock.pk: stock.quantity},
            takers=buyers,
            last_reservation=orders.aggregate(last=Max("reservation"))["last"] or 0,
        )

    return with_group_lock(voucher.stock.group_id, load, wait_seconds=wait_seconds)


def voucher_reservations_check(*, voucher: Voucher, reservations: Reservations) -> GroupCheck:
    """The voucher's Redis state against the database (``inventory.reconcile``)."""
    return group_check(
        group_id=voucher.stock.group_id,
        reservations=reservations,
        database_stock=lambda: dict(Stock.objects.filter(pk=voucher.stock_id).values_list("id", "quantity")),
        database_takers=lambda: _count_by_user(Order.objects.filter(voucher_id=voucher.pk)),
    )


def _count_by_user(records) -> dict[int, int]:
    return dict(records.values("user_id").annotate(n=Count("id")).values_list("user_id", "n"))
