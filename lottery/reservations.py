"""The prize draw's ``redis_lua`` state: loaded into Redis from the database, and reservations
persisted as draws (``inventory.persist``)."""

from __future__ import annotations

from django.db.models import Count, Max

from inventory.models import Stock
from inventory.persist import Persisted, reservations_persist, with_group_lock
from inventory.reconcile import GroupCheck, group_check
from inventory.reservations import Pending, Reservations, Rules

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


def pool_reservations_load(*, pool: Pool, reservations: Reservations, wait_seconds: float = 30) -> bool:
    """Load the pool's state into Redis from the database (its window, draw limit, weight of
    no prize, every prize's stock, each user's draws and the last reservation written),
    unless a state is there already: True when loaded.

    Holds the group's lock (``inventory.persist.group_lock``) while it reads, so that a
    batch being persisted commits first; raises ``LockBusy`` when it waits longer than
    ``wait_seconds``.
    """

    def load() -> bool:
        draws = Draw.objects.filter(pool_id=pool.pk)
        takers = _count_by_user(draws)
        seqs: dict[int, list[int]] = {}
        for user_id, seq in draws.values_list("user_id", "seq"):
            seqs.setdefault(user_id, []).append(seq)
        stock = dict(Stock.objects.filter(group_id=pool.group_id).values_list("id", "quantity"))
        return reservations.load(
            group_id=pool.group_id,
            rules=Rules(
                begin_at=pool.begin_at, end_at=pool.end_at, limit=pool.draws_per_user, no_take=pool.no_prize_weight
            ),
            stock=stock,
            takers=takers,
            seqs=seqs,
            last_reservation=draws.aggregate(last=Max("reservation"))["last"] or 0,
        )

    return with_group_lock(pool.group_id, load, wait_seconds=wait_seconds)


def pool_reservations_check(*, pool: Pool, reservations: Reservations) -> GroupCheck:
    """The pool's Redis state against the database (``inventory.reconcile``)."""
    return group_check(
        group_id=pool.group_id,
        reservations=reservations,
        database_stock=lambda: dict(Stock.objects.filter(group_id=pool.group_id).values_list("id", "quantity")),
        database_takers=lambda: _count_by_user(Draw.objects.filter(pool_id=pool.pk)),
    )


def _count_by_user(records) -> dict[int, int]:
    return dict(records.values("user_id").annotate(n=Count("id")).values_list("user_id", "n"))
