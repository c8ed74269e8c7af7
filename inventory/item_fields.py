"""The fields every item has, whatever its product (its window, its strategy, its description,
whether it is listed), checked once for every product: when an item is created, and when staff
change it, all or nothing, with its ``redis_lua`` state in step
(``inventory.redis_lua.item_states``).

A product's services take them as ``**fields: Unpack[ItemFields]`` (create) or
``**changes: Unpack[ItemChanges]`` (update) beside their own fields, check them here, check
their own, and write them all through :func:`item_create` or :func:`item_changes_save`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from django.db import transaction

from core.window import window_validate

from .product import Product
from .redis_lua.item_states import item_created, item_update
from .validators import hold_seconds_valid, strategy_valid


class ItemFields(TypedDict):
    """The fields every item is created with."""

    begin_at: datetime
    end_at: datetime
    strategy: str
    description: NotRequired[str]
    listed: NotRequired[bool]
    hold_seconds: NotRequired[int]


class ItemChanges(TypedDict, total=False):
    """The fields every item has that staff may change; one left out, or None, stays as it is."""

    begin_at: datetime | None
    end_at: datetime | None
    strategy: str | None
    description: str | None
    hold_seconds: int | None


def item_fields_clean(
    *,
    begin_at: datetime,
    end_at: datetime,
    strategy: str,
    description: str = "",
    listed: bool = True,
    hold_seconds: int = 0,
) -> dict[str, object]:
    """A new item's common fields, by name. ``InvalidInput`` for a window that is not one
    (``core.window.window_validate``), a strategy that names none, or a hold window that is
    not a whole number of seconds from 0 to a day."""
    window_validate(begin_at, end_at)
    strategy = strategy_valid(strategy)
    return {
        "begin_at": begin_at,
        "end_at": end_at,
        "strategy": strategy,
        "description": description,
        "listed": listed,
        "hold_seconds": hold_seconds_valid(hold_seconds),
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
) -> dict[str, object]:
    """The common fields to change, by name: the window when either end changes (both ends,
    the other one kept), the strategy, the description. ``InvalidInput`` as
    :func:`item_fields_clean` says."""
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
    return changes


def item_changes_save(
    product: Product,
    item: Any,
    changes: Mapping[str, object],
    *,
    then: Callable[[], dict[int, int]] | None = None,
) -> None:
    """Write ``changes`` (checked: the common fields by :func:`item_changes_clean`, the
    product's own by the product) to ``item`` in one save, then ``then()``, the product's other
    writes (a voucher's restock), which answers the units it added per stock row; all in one
    transaction, with the item's ``redis_lua`` state in step: switched with its strategy, its
    rules and its units changed with the database
    (``inventory.redis_lua.item_states.item_update``)."""

    @transaction.atomic
    def change() -> dict[int, int]:
        for field, value in changes.items():
            setattr(item, field, value)
        if changes:
            item.save(update_fields=list(changes))
        return {} if then is None else then()

    item_update(product, item, change, switch_to=changes.get("strategy"), units=lambda added: added)
