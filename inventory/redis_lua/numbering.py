"""The floor a ``redis_lua`` state's reservation counter starts from when Redis lost it,
written to the database before the state is loaded with it (``scripts.LOAD``).

Redis keeps nothing on disk: a state whose every key is gone (no stream, no kept counter)
says nothing of how far its counter had counted, and the database may hold none of what it
answered (lost again before a reservation was written). So each such load records its floor
per state, and the next one starts ``LOST_NUMBERS_GAP`` above both that and the database's
last number (``values.lost_counter_floor``). The caller holds the group's lock exclusive, so
no other load of the state runs in between; a process that dies between the write and the
load leaves a gap in the numbers, never a number handed out twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Max

from ..models import LostCounterFloor
from .values import lost_counter_floor, state_of, state_reservations

if TYPE_CHECKING:
    from ..product import Product


def state_last_reservation(product: Product, state: int) -> int:
    """The highest reservation id of ``state`` that the database holds, where its counter
    starts (or its lost counter's floor, ``LOST_NUMBERS_GAP`` above).

    Of every record, not those that count against the per-user rule alone: a released
    order keeps its unique reservation id, and a counter started below it answered that
    id again, its record found persisted (``item_states._persisted``) and never written. Of the
    state's range alone, which is its item's (a group is one item's, a state one group's),
    and no earlier layout's states (a rebucket to one row and back leaves those among the
    item's records): the last entry of that range of the unique index on the reservation,
    no row read, where a filter on the item besides reads each of the item's rows in it."""
    first, past = state_reservations(state)
    found = product.record_model.objects.filter(reservation__gte=first, reservation__lt=past)
    return found.aggregate(last=Max("reservation"))["last"] or 0


def lost_floor_record(state: int, database_floor: int) -> int:
    """The floor the lost counter of ``state`` starts from, committed (with the caller's own
    transaction, where it runs in one) before it is answered."""
    group_id, bucket = state_of(state)
    with transaction.atomic():
        recorded, _ = LostCounterFloor.objects.select_for_update().get_or_create(
            group_id=group_id, bucket=bucket, defaults={"floor": 0}
        )
        recorded.floor = lost_counter_floor(database_floor, recorded.floor)
        recorded.save(update_fields=["floor"])
    return recorded.floor
