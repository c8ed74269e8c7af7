"""The prize draw's Celery tasks: persisting ``redis_lua`` reservations as draws, and keeping
the pools' Redis state true to the database."""

from __future__ import annotations

from functools import partial

from celery import shared_task

from inventory.groups import DRAIN_TASK_OPTIONS, TEND_TASK_OPTIONS, drain_task_run
from inventory.reconcile import GroupCheck, report_drift
from inventory.reservations import reservations_client

from .models import Pool
from .reservations import pool_reservations_persist, pool_reservations_reconcile
from .selectors import pools_with_reservations


@shared_task(**DRAIN_TASK_OPTIONS)
def pool_reservations_drain(self, pool_id: int, group_id: int) -> int:
    """Persist the pool's pending reservations until none is left; the records handled."""
    return drain_task_run(self, group_id, partial(pool_reservations_persist, pool_id=pool_id, group_id=group_id))


@shared_task(**TEND_TASK_OPTIONS)
def pool_reservations_rebuild(pool_id: int) -> dict:
    """Reconcile one pool now (a user found its state missing): rebuilt if missing."""
    return pool_reservations_reconcile(pool=Pool.objects.get(pk=pool_id), reservations=reservations_client()).as_dict()


@shared_task(**TEND_TASK_OPTIONS)
def pools_reservations_sweep() -> int:
    """Beat: ask for a drain of every ``redis_lua`` pool whose stream has reservations
    waiting (those whose asking was lost: a web process that died after its script, or a
    broker that was down); the number asked for."""
    reservations = reservations_client()
    waiting = [pool for pool in pools_with_reservations() if reservations.waiting(group_id=pool.group_id)]
    for pool in waiting:
        pool_reservations_drain.delay(pool.pk, pool.group_id)
    return len(waiting)


@shared_task(**TEND_TASK_OPTIONS)
def pools_reservations_reconcile() -> int:
    """Beat: check and repair every ``redis_lua`` pool's state, rebuilding a missing one; the
    number that drifted or were rebuilt (each logged)."""
    reservations = reservations_client()
    checks: list[tuple[int, GroupCheck]] = [
        (pool.pk, pool_reservations_reconcile(pool=pool, reservations=reservations))
        for pool in pools_with_reservations()
    ]
    return report_drift("pool", checks)
