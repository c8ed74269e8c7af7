"""The flash sale's Celery tasks: persisting ``redis_lua`` reservations as orders."""

from __future__ import annotations

from functools import partial

from celery import shared_task

from inventory.persist import DRAIN_TASK_OPTIONS, drain_task_run

from .models import Voucher
from .reservations import voucher_reservations_persist


@shared_task(**DRAIN_TASK_OPTIONS)
def voucher_reservations_drain(self, voucher_id: int) -> int:
    """Persist the voucher's pending reservations until none is left; the records handled."""
    voucher = Voucher.objects.select_related("stock").get(pk=voucher_id)
    return drain_task_run(self, voucher.stock.group_id, partial(voucher_reservations_persist, voucher=voucher))
