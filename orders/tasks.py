"""The flash sale's Celery tasks: persisting ``redis_lua`` reservations as orders."""

from __future__ import annotations

from celery import shared_task
from django.db import DatabaseError

from inventory.persist import BUSY_RETRIES, BUSY_RETRY_SECONDS, drain_group, persist_options

from .models import Voucher
from .reservations import voucher_reservations_persist


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
def voucher_reservations_drain(self, voucher_id: int) -> int:
    """Persist the voucher's pending reservations until none is left; the records handled."""
    voucher = Voucher.objects.select_related("stock").get(pk=voucher_id)
    options = persist_options()
    handled = drain_group(
        voucher.stock.group_id, lambda batch: voucher_reservations_persist(voucher=voucher, batch=batch, **options)
    )
    if handled is None:  # another worker drains the group: come back once it is done
        raise self.retry(countdown=BUSY_RETRY_SECONDS, max_retries=BUSY_RETRIES)
    return handled
