"""The fields every item has, whatever its product (its window, its strategy, its description,
whether it is listed), checked once for every product: when an item is created, and when staff
change it, all or nothing, with its ``redis_lua`` state in step
(``inventory.redis_lua.item_states``).

A product's services take them as ``**fields: Unpack[ItemFields]`` (create) or
``**changes: Unpack[ItemChanges]`` (update) beside their own fields, check them here, check
their own, and write them all through :func:`item_create` or :func:`item_changes_save`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from django.db import transaction

from core.window import window_validate

from .admission.room import item_for_queue_forget
from .buckets import buckets_valid
from .errors import RowsLocked
from .product import Product
from .records import (
    DEFAULT_ABANDON_COOLDOWN_SECONDS,
    DEFAULT_ABANDON_LIMIT,
    DEFAULT_ADMISSION_RATE,
    DEFAULT_TICKET_SECONDS,
    Admission,
)
from .redis_lua.item_states import item_created, item_update
from .validators import (
    abandon_cooldown_valid,
    abandon_limit_valid,
    admission_valid,
    hold_seconds_valid,
    strategy_valid,
)


class ItemFields(TypedDict):
    """The fields every item is created with."""

    begin_at: datetime
    end_at: datetime
    strategy: str
    description: NotRequired[str]
    listed: NotRequired[bool]
    hold_seconds: NotRequired[int]
    buckets: NotRequired[int]
    admission: NotRequired[str]
    admission_rate: NotRequired[float]
    admission_ticket_seconds: NotRequired[int]
    abandon_limit: NotRequired[int]
    abandon_cooldown_seconds: NotRequired[int]


class ItemChanges(TypedDict, total=False):
    """The fields every item has that staff may change; one left out, or None, stays as it is."""

    begin_at: datetime | None
    end_at: datetime | None
    strategy: str | None
    description: str | None
    hold_seconds: int | None
    admission: str | None
    admission_rate: float | None
    admission_ticket_seconds: int | None
    abandon_limit: int | None
    abandon_cooldown_seconds: int | None


def item_fields_clean(
    *,
    begin_at: datetime,
    end_at: datetime,
    strategy: str,
    description: str = "",
    listed: bool = True,
    hold_seconds: int = 0,
    buckets: int = 1,
    admission: str = Admission.OPEN,
    admission_rate: float = DEFAULT_ADMISSION_RATE,
    admission_ticket_seconds: int = DEFAULT_TICKET_SECONDS,
    abandon_limit: int = DEFAULT_ABANDON_LIMIT,
    abandon_cooldown_seconds: int = DEFAULT_ABANDON_COOLDOWN_SECONDS,
) -> dict[str, object]:
    """A new item's common fields, by name. ``InvalidInput`` for a window that is not one
    (``core.window.window_validate``), a strategy that names none, a hold window that is
    not a whole number of seconds from 0 to a day, buckets not from 1 to 64
    (``inventory.buckets``), a waiting room's settings out of bounds (``admission_valid``), or a
    cap on abandoned holds or a cooldown out of bounds (docs/design.md, "Abandoned holds")."""
    window_validate(begin_at, end_at)
    strategy = strategy_valid(strategy)
    return {
        "begin_at": begin_at,
        "end_at": end_at,
        "strategy": strategy,
        "description": description,
        "listed": listed,
        "hold_seconds": hold_seconds_valid(hold_seconds),
        "buckets": buckets_valid(buckets),
        **admission_valid(admission, admission_rate, admission_ticket_seconds),
        "abandon_limit": abandon_limit_valid(abandon_limit),
        "abandon_cooldown_seconds": abandon_cooldown_valid(abandon_cooldown_seconds),
    }


def item_create(product: Product, **fields: object) -> Any:
    """The product's new item with ``fields``, checked (the common ones by
    :func:`item_fields_clean`, its own by the product), written in the caller's transaction;
    under ``redis_lua`` its state is opened once that commits."""
    item = product.item_model.objects.create(**fields)
    item_created(product, item)
    return item


def item_changes_clean(
    item: Any,
    *,
    begin_at: datetime | None = None,
    end_at: datetime | None = None,
    strategy: str | None = None,
    description: str | None = None,
    hold_seconds: int | None = None,
    admission: str | None = None,
    admission_rate: float | None = None,
    admission_ticket_seconds: int | None = None,
    abandon_limit: int | None = None,
    abandon_cooldown_seconds: int | None = None,
) -> dict[str, object]:
    """The common fields to change, by name: the window when either end changes (both ends,
    the other one kept), the strategy, the description, the hold window, the waiting room's
    settings (checked together, those not changed as they are), the cap on abandoned holds
    and the cooldown. ``InvalidInput`` as :func:`item_fields_clean` says. A room's line and
    its tickets out stand through a change of its rate or lifetime; switched to ``open``,
    takes need no ticket."""
    changes: dict[str, object] = {}
    if begin_at is not None or end_at is not None:
        changes["begin_at"], changes["end_at"] = begin_at or item.begin_at, end_at or item.end_at
        window_validate(changes["begin_at"], changes["end_at"])
    if strategy is not None:
        changes["strategy"] = strategy_valid(strategy)
    if description is not None:
        changes["description"] = description
    if hold_seconds is not None:
        changes["hold_seconds"] = hold_seconds_valid(hold_seconds)
    room = {
        "admission": admission,
        "admission_rate": admission_rate,
        "admission_ticket_seconds": admission_ticket_seconds,
    }
    if any(value is not None for value in room.values()):
        checked = admission_valid(*(getattr(item, name) if value is None else value for name, value in room.items()))
        changes |= {name: checked[name] for name, value in room.items() if value is not None}
    if abandon_limit is not None:
        changes["abandon_limit"] = abandon_limit_valid(abandon_limit)
    if abandon_cooldown_seconds is not None:
        changes["abandon_cooldown_seconds"] = abandon_cooldown_valid(abandon_cooldown_seconds)
    return changes


# How many times a change of the stock rows is made before a take's hold on one of them is
# answered busy (``RowsLocked``): a take holds a row for milliseconds.
ROWS_LOCKED_TRIES = 100


def item_changes_save(
    product: Product,
    item: Any,
    changes: Mapping[str, object],
    *,
    then: Callable[[], dict[int, int]] | None = None,
    rows_moved: bool = False,
) -> None:
    """Write ``changes`` (checked: the common fields by :func:`item_changes_clean`, the
    product's own by the product) to ``item`` in one save, after ``then()``, the product's other
    writes (a voucher's restock), which answers the units it added per stock row (or moved
    between rows: ``rows_moved``); all in one transaction, with the item's ``redis_lua`` state
    in step: switched with its strategy, its rules and its units changed with the database
    (``inventory.redis_lua.item_states.item_update``).

    The stock rows are written before the item's row: a take locks its stock row, then its
    record's insert takes a shared lock on the item's row (the foreign key), so a change that
    held the item's row while it waited for a stock row would deadlock with it."""

    @transaction.atomic
    def change() -> dict[int, int]:
        for field, value in changes.items():
            setattr(item, field, value)
        done = {} if then is None else then()
        if changes:
            item.save(update_fields=list(changes))
        return done

    def change_made() -> dict[int, int]:
        # A row held by a take (``RowsLocked``): the change rolled back, made again shortly,
        # unless the caller's own transaction holds what it wrote (then the caller is told).
        for tries_left in range(ROWS_LOCKED_TRIES - 1, -1, -1):
            try:
                return change()
            except RowsLocked:
                if not tries_left or transaction.get_connection().in_atomic_block:
                    raise
                time.sleep(random.uniform(0.005, 0.02))
        raise AssertionError("the last try raises")

    item_for_queue_forget(product, item.pk)
    item_update(
        product, item, change_made, switch_to=changes.get("strategy"), units=lambda added: added, rows_moved=rows_moved
    )
