"""The flash sale's Celery tasks: persisting ``redis_lua`` reservations as orders, and keeping
the vouchers' Redis state true to the database."""

from __future__ import annotations

from functools import partial

from celery import shared_task

from inventory.groups import DRAIN_TASK_OPTIONS, TEND_TASK_OPTIONS, drain_task_run
from inventory.reconcile import GroupCheck, report_drift
from inventory.reservations import reservations_client

from .models import Voucher
from .reservations import voucher_reservations_persist, voucher_reservations_reconcile
from .selectors import vouchers_with_reservations


@shared_task(**DRAIN_TASK_OPTIONS)
def voucher_reservations_drain(self, voucher_id: int, group_id: int) -> int:
    """Persist the voucher's pending reservations until none is left; the records handled."""
    persist = partial(voucher_reservations_persist, voucher_id=voucher_id, group_id=group_id)
    return drain_task_run(self, group_id, persist)


@shared_task(**TEND_TASK_OPTIONS)
def voucher_reservations_rebuild(voucher_id: int) -> dict:
    """Reconcile one voucher now (a buyer found its state missing): rebuilt if missing."""
    voucher = Voucher.objects.select_related("stock").get(pk=voucher_id)
    return voucher_reservations_reconcile(voucher=voucher, reservations=reservations_client()).as_dict()


@shared_task(**TEND_TASK_OPTIONS)
def vouchers_reservations_sweep() -> int:
    """Beat: ask for a drain of every ``redis_lua`` voucher whose stream has reservations
    waiting (those whose asking was lost: a web process that died after its script, or a
    broker that was down); the number asked for."""
    reservations = reservations_client()
    waiting = [v for v in vouchers_with_reservations() if reservations.waiting(group_id=v.stock.group_id)]
    for voucher in waiting:
        voucher_reservations_drain.delay(voucher.pk, voucher.stock.group_id)
    return len(waiting)


@shared_task(**TEND_TASK_OPTIONS)
def vouchers_reservations_reconcile() -> int:
    """Beat: check and repair every ``redis_lua`` voucher's state, rebuilding a missing one;
    the number that drifted or were rebuilt (each logged)."""
    reservations = reservations_client()
    checks: list[tuple[int, GroupCheck]] = [
        (voucher.pk, voucher_reservations_reconcile(voucher=voucher, reservations=reservations))
        for voucher in vouchers_with_reservations()
    ]
    return report_drift("voucher", checks)
