"""The prize draw's ``redis_lua`` reservations persisted as draws (``inventory.persist``)."""

from __future__ import annotations

from inventory.persist import Persisted, reservations_persist
from inventory.reservations import Pending, Reservations

from .models import Draw, Pool, Prize


def pool_reservations_persist(*, pool: Pool, reservations: Reservations, consumer: str, **options) -> Persisted:
    """Write the pool's pending reservations as confirmed draws (a prize, or none), once
    each; ``options`` are those of ``inventory.persist.reservations_persist``."""

    def persisted(ids: list[int]) -> set[int]:
        return set(Draw.objects.filter(reservation__in=ids).values_list("reservation", flat=True))

    def write(fresh: list[Pending]) -> None:
        prize_of = dict(Prize.objects.filter(pool_id=pool.pk).values_list("stock_id", "id"))
        Draw.objects.bulk_create(
            Draw(
                user_id=one.user_id,
                pool_id=pool.pk,
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
        group_id=pool.group_id,
        reservations=reservations,
        consumer=consumer,
        persisted=persisted,
        write=write,
        **options,
    )
