"""The flash sale's ``redis_lua`` reservations persisted as orders (``inventory.persist``)."""

from __future__ import annotations

from inventory.persist import Persisted, reservations_persist
from inventory.reservations import Pending, Reservations

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
