"""A unit's life after its take, for every product and strategy (docs/design.md,
"Lifecycle"): held for the user until a deadline, then settled (paid, claimed) or released
(cancelled, expired, forfeited), its unit back in the stock exactly once.

An item with a hold window (``hold_seconds``) has its takes that took a
unit written ``held`` with ``hold_until``; without one, or for a draw of nothing, a take
is settled when it is made, as before. Every change of a held record runs under the
item's strategy (``StockStrategy.change``): a guarded strategy changes only a record still
held, so of a payment, a cancel, an expiry task, the sweep and a redelivered task racing
for one record exactly one writes. ``none`` and ``local`` read, pause and write, as their
takes do, and the load tests show them pay and release one record, or release it twice.

A take writes its record held (``inventory.take``, which also asks for its expiry at the
deadline). Expiry runs without anyone asking: a task at the deadline
(``inventory.take.hold_expire_later``), and the beat's sweep (``holds_expire_due``) as the
backstop for a task that was lost.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import F, Model
from django.utils import timezone

from core.ratelimit import rate_count

from .errors import (
    AlreadyClaimed,
    AlreadyPaid,
    HoldCancelled,
    HoldClosed,
    HoldExpired,
    HoldForfeited,
    HoldPending,
    NothingHeld,
)
from .models import Stock, StockGroup
from .product import Product
from .records import Record
from .reservation_types import group_tag
from .strategies import STRATEGIES
from .strategies.changes import Change, Returned, lock_group, lock_rows, over_counted, units_back
from .take import user_key

logger = logging.getLogger(__name__)

Status = Record.Status

# What a record that is not held answers a settle or a release with, by its status.
_CLOSED: dict[str, type[HoldClosed]] = {
    Status.EXPIRED: HoldExpired,
    Status.CANCELLED: HoldCancelled,
    Status.FORFEITED: HoldForfeited,
    Status.PAID: AlreadyPaid,
    Status.CLAIMED: AlreadyClaimed,
    Status.PENDING: HoldPending,
    Status.FAILED: HoldCancelled,
}


def closed(product: Product, record: Model) -> HoldClosed:
    """The refusal of a settle or release of a record that is not held."""
    if record.status == Status.CONFIRMED:
        return NothingHeld() if product.unit_of(record) is None else _CLOSED[product.settled]()
    return _CLOSED[record.status]()


def hold_change_counted(product: Product, record: Model, *, action: str, user_id: int, address: str) -> None:
    """Count a change of the held ``record`` (a cancel, a claim, a pay) by ``user_id`` from
    ``address`` against ``action``'s rate limits, on the record's item, as its take counted
    them: ``RateLimited`` (429) when over one, nothing when no limit applies. The API's
    change and the page's button count through here."""
    rate = rate_count(action=action, user_id=user_id, address=address)
    if rate is not None:
        rate.count(tag=group_tag(product.group_of(getattr(record, product.item_field))))


def hold_settle(product: Product, record: Model, *, now: datetime | None = None) -> Model:
    """Settle a held record (a payment confirmed, a prize claimed) before its deadline.

    Past its deadline it lapses here and then (its unit goes back) and the caller is told
    so; a record not held is refused in the words of its state. Raises a ``HoldClosed``.

    ``record`` is the caller's, as read (``order_get``, ``draw_get``: with its item as
    ``Product.group_of`` reads it); it is not read again, and is changed in place."""
    now = now or timezone.now()
    if not record.is_held:
        raise closed(product, record)
    if record.hold_until <= now:
        hold_release(product, record, target=product.lapsed, now=now)
        raise closed(product, record)
    item = _item_of(product, record)
    return _changed(product, item, record, _change(product, item, record, target=product.settled, now=now))


def hold_release(product: Product, record: Model, *, target: str, now: datetime | None = None) -> Model:
    """Release a held record to ``target`` (cancelled, expired, forfeited): its unit goes
    back to the stock once. A record not held any more is refused (``HoldClosed``). As
    :func:`hold_settle`, on the caller's record."""
    if not record.is_held:
        raise closed(product, record)
    item = _item_of(product, record)
    return _changed(product, item, record, _change(product, item, record, target=target, now=now or timezone.now()))


def _item_of(product: Product, record: Model) -> Any:
    # As read with the record: the strategy that guards its change, and its group. A record
    # read without it reads it here, once.
    return getattr(record, product.item_field)


def _change(product: Product, item: Any, record: Model, *, target: str, now: datetime) -> Change:
    if target == product.settled:
        fields: dict = {"settled_at": now}
        still_before = now
        stock_id = None
    else:
        fields = _release_fields(product, now)
        still_before = None
        stock_id = product.unit_of(record)
    return Change(
        records=type(record).objects.filter(pk=record.pk),
        target=target,
        group_id=product.group_of(item),
        user_key=user_key(product.kind, item.pk, record.user_id),
        fields=fields,
        stock_id=stock_id,
        still_before=still_before,
        kind=product.kind,
        record_id=record.pk,
        user_id=record.user_id,
        frees_take=product.release_frees_take,
        unit_field=product.unit_field,
        counted=partial(product.counted, item.pk, record.user_id),
        allowed=partial(product.limit_of, item.pk),
        over_rule=target != product.settled and product.release_frees_take and _over_rule(product, item),
    )


def _over_rule(product: Product, item: Any) -> bool:
    """Whether the item holds takes past the per-user rule now (an unguarded strategy made
    them): a release under any strategy then keeps their running totals too."""
    return StockGroup.objects.filter(pk=product.group_of(item), over_takes__gt=0).exists()


def _release_fields(product: Product, now: datetime) -> dict:
    """What a release writes besides the status and the count of returns: when, and the
    field it clears (a draw's prize goes back with its unit)."""
    fields: dict = {"released_at": now}
    if product.release_clears:
        fields[product.release_clears] = None
    return fields


def _changed(product: Product, item: Any, record: Model, change: Change) -> Model:
    if STRATEGIES[item.strategy].change(change):
        record.status = change.target
        for name, value in change.fields.items():
            setattr(record, name, value)
        return record
    record.refresh_from_db(fields=["status", "hold_until", "settled_at", "released_at"])
    if record.is_held:
        # Its deadline passed between the check and the write: lapsed, and released by the
        # expiry as any other (not here, inside what may be the caller's transaction).
        raise _CLOSED[product.lapsed]()
    raise closed(product, record)


def hold_lapse(product: Product, record: Model, *, now: datetime | None = None) -> bool:
    """Release ``record`` if its deadline has passed (the expiry, a pay that came too late);
    False when it is not held any more, or not due yet."""
    now = now or timezone.now()
    if not record.is_held or record.hold_until > now:
        return False
    try:
        hold_release(product, record, target=product.lapsed, now=now)
    except HoldClosed:
        return False
    return True


def holds_expire_due(
    product: Product, *, item_id: int | None = None, now: datetime | None = None, batch: int = 1000
) -> int:
    """Release up to ``batch`` held records of the kind (of one item, given ``item_id``)
    past their deadline, earliest first; the number released by this call.

    Items under ``none`` and ``local`` release each record their naive way. For every other
    strategy a batch is released in one transaction (``_expire``); a ``redis_lua`` item's
    under its group's lock, which reconciliation holds too, and its units go back to
    Redis before the lock is let go. Each read of what is due is a range of the index on
    (status, deadline, item), whatever else the table holds."""
    now = now or timezone.now()
    item_field = f"{product.item_field}_id"
    due = product.record_model.objects.filter(status=Status.HELD, hold_until__lte=now)
    # In the index's order: a batch reads its rows, not every due row sorted.
    due = due.order_by("hold_until", item_field, "pk")
    if item_id is None:
        item_ids = list(due.order_by().values_list(item_field, flat=True).distinct()[:batch])
    else:
        item_ids = [item_id]
    released = 0
    for item in product.items().filter(pk__in=item_ids):
        left = batch - released
        if left <= 0:
            break
        of_item = due.filter(**{item_field: item.pk})
        strategy = STRATEGIES[item.strategy]
        if not strategy.guarded:
            # Each record its naive way, with the item as read here (not once per record).
            records = list(of_item[:left])
            for record in records:
                setattr(record, product.item_field, item)
            released += sum(hold_lapse(product, record, now=now) for record in records)
        elif strategy.deferred:
            released += strategy.units_returned(
                product.group_of(item),
                lambda of_item=of_item, left=left, item=item: _expire(product, item, of_item, now=now, batch=left),
                kind=product.kind,
                frees_take=product.release_frees_take,
            )
        else:
            released += len(_expire(product, item, of_item, now=now, batch=left))
    return released


def holds_expire_all(product: Product, *, item_id: int | None = None) -> int:
    """Release every held record of the kind (of one item, given ``item_id``) past its
    deadline, a batch per transaction, until none is left; the number released."""
    released = 0
    while (done := holds_expire_due(product, item_id=item_id)) > 0:
        released += done
    return released


def _expire(product: Product, item: Any, due, *, now: datetime, batch: int) -> list[Returned]:
    """Release up to ``batch`` of ``due`` (the item's) in one transaction: their rows locked
    (``SKIP LOCKED``: a record being paid this instant is left for the next sweep), changed
    only while still held, and their units returned with one UPDATE per stock row; what each
    returned. Where the item holds takes past the per-user rule, their running totals
    follow each user's releases."""
    over_rule = product.release_frees_take and _over_rule(product, item)
    with transaction.atomic():
        if over_rule:
            lock_group(product.group_of(item))  # before the stock rows, as every writer of both
        # The stock rows first, then the records, as a take and a single release lock them:
        # the other order deadlocks against a purchase. Only the records' own rows are
        # locked (a join's would be too: MariaDB has no ``OF``).
        candidates = list(due.values_list("pk", flat=True)[:batch])
        if not candidates:
            return []
        units_of = product.record_model.objects.filter(pk__in=candidates).values_list(product.unit_field, flat=True)
        lock_rows(sorted({stock_id for stock_id in units_of if stock_id is not None}))
        ids = list(due.filter(pk__in=candidates).select_for_update(skip_locked=True).values_list("pk", flat=True))
        if not ids:
            return []
        records = product.record_model.objects.filter(pk__in=ids)
        rows = [Returned(*row) for row in records.values_list("pk", "user_id", product.unit_field)]
        fields = {"status": product.lapsed, "releases": F("releases") + 1, **_release_fields(product, now)}
        records.filter(status=Status.HELD).update(**fields)
        units = Counter(row.stock_id for row in rows if row.stock_id is not None)
        for stock_id, count in sorted(units.items()):
            Stock.objects.filter(pk=stock_id).update(**units_back(count))
        if over_rule:
            for user_id, count in Counter(row.user_id for row in rows).items():
                over_counted(
                    product.group_of(item),
                    counted=partial(product.counted, item.pk, user_id),
                    allowed=partial(product.limit_of, item.pk),
                    delta=-count,
                )
    return rows
