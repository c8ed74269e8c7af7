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
backstop for a task that was lost. Either says what is due (an ``Expiry``) and the item's
strategy releases it (``StockStrategy.expire``), as it releases one record: this module
writes neither a record's status nor a stock row.
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.db.models import Model, QuerySet
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
from .product import Product
from .records import Record
from .redis_lua.values import group_tag
from .strategies import STRATEGIES
from .strategies.changes import Change, Expiry, takes_over_rule

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
        return NothingHeld() if getattr(record, product.unit_field) is None else _CLOSED[product.settled]()
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
    _lapse_if_due(product, record, now)
    item = _item_of(product, record)
    return _changed(product, item, record, _record_change(product, item, record, target=product.settled, now=now))


def hold_release(product: Product, record: Model, *, target: str, now: datetime | None = None) -> Model:
    """Release a held record to ``target`` (cancelled, expired, forfeited): its unit goes
    back to the stock once. A record not held any more is refused (``HoldClosed``). As
    :func:`hold_settle`, on the caller's record. A record past its deadline has lapsed,
    released yet or not: a cancel then releases it as the expiry would and is refused in the
    lapsed state's words (``expired``), as a pay is."""
    if not record.is_held:
        raise closed(product, record)
    now = now or timezone.now()
    if target != product.lapsed:
        _lapse_if_due(product, record, now)
    item = _item_of(product, record)
    change = _record_change(product, item, record, target=target, now=now)
    return _changed(product, item, record, change)


def _lapse_if_due(product: Product, record: Model, now: datetime) -> None:
    """A held record past its deadline has lapsed, released yet or not: a settle or a cancel
    of it releases it here as the expiry would, and is refused in the lapsed state's words."""
    if record.hold_until <= now:
        hold_release(product, record, target=product.lapsed, now=now)
        raise closed(product, record)


def _item_of(product: Product, record: Model) -> Any:
    # As read with the record: the strategy that guards its change, and its group. A record
    # read without it reads it here, once.
    return getattr(record, product.item_field)


def _record_change(product: Product, item: Any, record: Model, *, target: str, now: datetime) -> Change:
    unit = getattr(record, product.unit_field)
    return _change(product, item, record.pk, record.user_id, unit, target=target, now=now)


def _change(
    product: Product, item: Any, record_id: int, user_id: int, stock_id: int | None, *, target: str, now: datetime
) -> Change:
    """The change of the item's record ``record_id`` (of ``user_id``, its unit from
    ``stock_id``) to ``target``: a settle, or a release that returns the unit."""
    if target == product.settled:
        fields: dict = {"settled_at": now}
        still_before = now
        stock_id = None
    else:
        fields = _release_fields(product, now)
        still_before = None
    return Change(
        records=product.record_model.objects.filter(pk=record_id),
        target=target,
        group_id=product.group_of(item),
        fields=fields,
        stock_id=stock_id,
        still_before=still_before,
        kind=product.kind,
        item_id=item.pk,
        record_id=record_id,
        user_id=user_id,
        frees_take=product.release_frees_take,
        lapses=target == product.lapsed,
        unit_field=product.unit_field,
        counted=partial(product.counted, item.pk, user_id),
        allowed=partial(product.limit_of, item.pk),
        over_rule=target != product.settled and product.release_frees_take and takes_over_rule(product.group_of(item)),
    )


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


def hold_settle_asked(product: Product, record: Model, *, now: datetime) -> bool:
    """Say, in the caller's transaction, that a settle of the held ``record`` was asked before
    its deadline (a voucher's payment accepted, its confirmation on the way): its lapse, should
    the confirmation come too late, is then no abandoned hold (``strategies.changes.abandons``).
    Written only while the record is held and ``now`` before its deadline: True; False
    otherwise, the record's status and deadline read again (one query either way when
    written: it is the read of whether it is still held)."""
    held = product.record_model.objects.filter(pk=record.pk, status=Status.HELD, hold_until__gt=now)
    if held.update(settle_asked_at=now):
        record.status, record.settle_asked_at = Status.HELD, now
        return True
    record.refresh_from_db(fields=["status", "hold_until"])
    return False


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
    product: Product,
    *,
    item_id: int | None = None,
    now: datetime | None = None,
    batch: int = 1000,
    passed: set[int] | None = None,
) -> int:
    """Release up to ``batch`` held records of the kind (of one item, given ``item_id``)
    past their deadline, earliest first; the number released by this call.

    Each item's strategy releases its own (``StockStrategy.expire``): a batch in one
    transaction, or ``none`` and ``local`` a record at a time, their naive way. An item's
    due records are read in a range of the index on (item, status, deadline), in its order:
    that item's due rows and no other's, however many due rows other items hold before them
    (an item whose holds stay due, its Redis out of reach, costs every other item's expiry
    task nothing). The sweep (no ``item_id``) finds its items in a range of the index on
    (status, deadline, item), the earliest due first: the first rows left to release, and
    the due rows of the items it passed over, read past. An item whose release fails (its
    lock busy, its Redis out of reach) is logged and left to the next sweep: the items after
    it in the index's order are released all the same, where one failing item stopped the
    sweep of every other. So is an item that released nothing (its own expiry task holding
    its rows): ``passed``, the items passed over, which the caller may carry to its next
    call."""
    now = now or timezone.now()
    item_field = f"{product.item_field}_id"
    held_due = product.record_model.objects.filter(status=Status.HELD, hold_until__lte=now)

    def due_of(item_pk: int) -> QuerySet:
        # In the order of the index on (item, status, deadline), its primary key last as in
        # every InnoDB index: a batch reads its rows, not the item's due rows sorted.
        return held_due.filter(**{item_field: item_pk}).order_by("hold_until", "pk")

    if item_id is not None:
        item = product.items().filter(pk=item_id).first()
        if item is None:
            return 0
        return STRATEGIES[item.strategy].expire(_expiry(product, item, due_of(item_id), now=now, batch=batch))
    # In the order of the index on (status, deadline, item): the first due rows' items read
    # from their rows, not every due row sorted.
    due = held_due.order_by("hold_until", item_field, "pk")
    released, passed = 0, set() if passed is None else passed
    # Each round either releases some rows or passes over some items: it ends.
    while released < batch:
        # The items of the first due rows, at most as many rows as are left to release: a
        # DISTINCT of the items read every due row, each batch, a mass expiry's square.
        rows = due.exclude(**{f"{item_field}__in": passed}) if passed else due
        item_ids = list(dict.fromkeys(rows.values_list(item_field, flat=True)[: batch - released]))
        if not item_ids:
            break
        items = product.items().in_bulk(item_ids)
        for item in (items[pk] for pk in item_ids if pk in items):  # the earliest due first
            left = batch - released
            if left <= 0:
                break
            done = 0
            try:
                done = STRATEGIES[item.strategy].expire(_expiry(product, item, due_of(item.pk), now=now, batch=left))
            except SoftTimeLimitExceeded:
                raise  # the sweep's own time is up: the next one goes on
            except Exception:
                logger.exception(
                    "Could not release the due holds of %s %s; the next sweep will.", product.kind, item.pk
                )
            released += done
            if not done:
                passed.add(item.pk)
    return released


def holds_expire_all(product: Product, *, item_id: int | None = None) -> int:
    """Release every held record of the kind (of one item, given ``item_id``) past its
    deadline, a batch per transaction, until none is left; the number released."""
    released, passed = 0, set()
    # The items passed over (a busy lock waited for, each time) stay passed over until the end.
    while (done := holds_expire_due(product, item_id=item_id, passed=passed)) > 0:
        released += done
    return released


def _expiry(product: Product, item: Any, due, *, now: datetime, batch: int) -> Expiry:
    """The release of up to ``batch`` of ``due`` (the item's held records past their
    deadline), as the item's strategy runs it."""
    return Expiry(
        due=due,
        target=product.lapsed,
        group_id=product.group_of(item),
        batch=batch,
        change_of=partial(_change, product, item, target=product.lapsed, now=now),
        fields=_release_fields(product, now),
        unit_field=product.unit_field,
        kind=product.kind,
        frees_take=product.release_frees_take,
        counted=partial(product.counted, item.pk),
        allowed=partial(product.limit_of, item.pk),
    )
