"""The prize draw's Celery tasks: persisting ``redis_lua`` reservations as draws."""

from __future__ import annotations

from functools import partial

from celery import shared_task

from inventory.persist import DRAIN_TASK_OPTIONS, drain_task_run

from .models import Pool
from .reservations import pool_reservations_persist


@shared_task(**DRAIN_TASK_OPTIONS)
def pool_reservations_drain(self, pool_id: int) -> int:
    """Persist the pool's pending reservations until none is left; the records handled."""
    pool = Pool.objects.get(pk=pool_id)
    return drain_task_run(self, pool.group_id, partial(pool_reservations_persist, pool=pool))
