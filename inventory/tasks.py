"""The Celery tasks of ``redis_lua``, one of each for every product (the ``kind`` argument,
``inventory.product``): persisting an item's reservations as its records, and keeping the
items' Redis state true to the database. The beat runs the sweep, the reconciliation and
the close once per kind (``CELERY_BEAT_SCHEDULE``)."""

from __future__ import annotations

import logging
from functools import partial

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from .errors import LockBusy
from .holds import holds_expire_all
from .items import items_closing, items_live
from .product import product_of
from .redis_lua.bucket_states import item_states
from .redis_lua.client import reservations_client
from .redis_lua.drain import DRAIN_TASK_OPTIONS, TEND_TASK_OPTIONS, drain_task_run
from .redis_lua.item_buckets import item_bucketed
from .redis_lua.item_states import (
    item_reservations_check,
    item_reservations_close,
    item_reservations_persist,
    item_reservations_reconcile,
)
from .redis_lua.reconcile import GroupCheck, report_drift
from .redis_lua.transfers import transfers_client

logger = logging.getLogger(__name__)


@shared_task(**DRAIN_TASK_OPTIONS)
def reservations_drain(self, kind: str, item_id: int, group_id: int, helper: bool = False) -> int:
    """Persist the item's pending reservations until none is left; the records handled.
    ``helper``: asked for by another drain of the group, to write beside it."""
    persist = partial(item_reservations_persist, product_of(kind), item_id=item_id, group_id=group_id)
    return drain_task_run(self, group_id, persist, helper=helper)


@shared_task(**TEND_TASK_OPTIONS)
def reservations_rebuild(kind: str, item_id: int) -> dict:
    """Reconcile one item now (a user found its state missing): rebuilt if missing."""
    product = product_of(kind)
    item = product.items().get(pk=item_id)
    return item_reservations_reconcile(product, item=item, reservations=reservations_client()).as_dict()


@shared_task(**TEND_TASK_OPTIONS)
def reservations_sweep(kind: str) -> int:
    """Beat: ask for a drain of every ``redis_lua`` item of the kind whose stream has
    reservations waiting (those whose asking was lost: a web process that died after its
    script, or a broker that was down), one per stream of a bucketed item's states; the
    number asked for. Also the bucketed items' recovery and rebalancer. Items whose sale
    ended less than ``RESERVATIONS_SWEEP_AFTER_END_SECONDS`` ago too: their last
    reservations would wait for ever otherwise."""
    product = product_of(kind)
    reservations = reservations_client()
    groups = []
    now = timezone.now()
    for item in items_live(product, ended_within=settings.RESERVATIONS_SWEEP_AFTER_END_SECONDS).order_by():
        buckets = item_bucketed(product, item)
        if buckets == 1:
            groups.append((item.pk, product.group_of(item)))
            continue
        # A bucketed item's states: a stream each; and its transfers tended here, the beat's
        # one pass over the live items: a move left half-done finished, then units moved to
        # states that ran low (inventory.redis_lua.transfers).
        states = item_states(product.group_of(item), buckets)
        groups += [(item.pk, state) for state in states]
        transfers = transfers_client(reservations)
        transfers.recover(states)
        if item.end_at > now:  # an ended sale sells nothing more: no units to move
            transfers.rebalance(states)
    waiting = [(item_id, group_id) for item_id, group_id in groups if reservations.waiting(group_id=group_id)]
    for item_id, group_id in waiting:
        reservations_drain.delay(kind, item_id, group_id)
    return len(waiting)


@shared_task(**TEND_TASK_OPTIONS)
def reservations_reconcile(kind: str) -> int:
    """Beat: check and repair the state of every ``redis_lua`` item of the kind, rebuilding a
    missing one; the number that drifted or were rebuilt (each logged). The totals first: each
    user's takes are compared on a difference, or once per ``RESERVATIONS_RECONCILE_FULL_SECONDS``
    (``inventory.redis_lua.reconcile``).

    An unlisted item (a race lab run's, whose lane audits its own state when it ends) is
    checked and its drift reported, never repaired: repaired mid-lane, the drift the lane's
    audit is there to find was gone before it looked."""
    product = product_of(kind)
    reservations = reservations_client()
    checks: list[tuple[int, GroupCheck]] = [
        (item.pk, _reconciled(product, item, reservations)) for item in items_live(product).order_by()
    ]
    return report_drift(kind, checks)


@shared_task(**TEND_TASK_OPTIONS)
def reservations_close(kind: str) -> int:
    """Beat: remove the Redis keys of every ``redis_lua`` item of the kind whose sale ended
    ``RESERVATIONS_CLOSE_AFTER_END_SECONDS`` ago (``inventory.items.items_closing``), its
    waiting reservations persisted first, so that Redis holds what the live sales need and
    not the site's history; the number closed. An item whose lock is busy is closed at a
    later beat."""
    product = product_of(kind)
    reservations = reservations_client()
    closed = 0
    for item in items_closing(product).order_by():
        try:
            closed += item_reservations_close(product, item=item, reservations=reservations)
        except LockBusy:
            logger.warning("Could not close %s %s's Redis state (its lock is busy); the next beat will.", kind, item.pk)
    return closed


def _reconciled(product, item, reservations) -> GroupCheck:
    if item.listed:
        return item_reservations_reconcile(product, item=item, reservations=reservations, totals_first=True)
    return item_reservations_check(product, item=item, reservations=reservations, totals_first=True)


@shared_task(**TEND_TASK_OPTIONS)
def holds_expire(kind: str, item_id: int) -> int:
    """At a deadline: release the item's holds that are due (``inventory.holds``); the number
    released. Run twice, or redelivered, it finds nothing more to release."""
    return holds_expire_all(product_of(kind), item_id=item_id)


@shared_task(**TEND_TASK_OPTIONS)
def holds_sweep(kind: str) -> int:
    """Beat: release every hold of the kind past its deadline, whose task was lost, not sent
    (a hold longer than ``HOLD_TASK_HORIZON_SECONDS``) or refused busy; the number released."""
    return holds_expire_all(product_of(kind))
