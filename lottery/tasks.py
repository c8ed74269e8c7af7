"""The prize draw's Celery tasks: persisting ``redis_lua`` reservations as draws."""

from __future__ import annotations

from celery import shared_task
from django.db import DatabaseError

from inventory.persist import BUSY_RETRIES, BUSY_RETRY_SECONDS, drain_group, persist_options

from .models import Pool
from .reservations import pool_reservations_persist


@shared_task(
    bind=True,
    # Acknowledged after it ran, and redelivered if its worker died: every reservation it
    # took is then taken over by the next consumer and written once (inventory.persist).
    acks_late=True,
    reject_on_worker_lost=True,
    # The database unreachable: try again later, backing off (the reservations wait in
    # Redis meanwhile, and the periodic drain comes by too).
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    max_retries=5,
    soft_time_limit=60,
    time_limit=90,
)
def pool_reservations_drain(self, pool_id: int) -> int:
    """Persist the pool's pending reservations until none is left; the records handled."""
    pool = Pool.objects.get(pk=pool_id)
    options = persist_options()

    def step(batch: int):
        return pool_reservations_persist(pool=pool, batch=batch, **options)

    handled = drain_group(pool.group_id, step)
    if handled is None:  # another worker drains the group: come back once it is done
        raise self.retry(countdown=BUSY_RETRY_SECONDS, max_retries=BUSY_RETRIES)
    return handled
