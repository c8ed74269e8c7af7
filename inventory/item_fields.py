"""The fields every item has, whatever its product (its window, its strategy, its
description), checked once for every product when staff change them, and written all or
nothing with the item's ``redis_lua`` state in step (``inventory.item_states``).

A product's update service takes them as ``**changes: Unpack[ItemChanges]`` beside its own
fields, checks them here, checks its own, and writes them all through
:func:`item_changes_save`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypedDict

from django.db import transaction

from core.window import window_validate

from .item_states import item_update
from .product import Product
from .validators import strategy_valid


class ItemChanges(TypedDict, total=False):
    """The fields every item has that staff may change; one left out, or None, stays as it is."""

    begin_at: datetime | None
    end_at: datetime | None
    strategy: str | None
    description: str | None


def item_changes_clean(
    item: Any,
    *,
    begin_at: datetime | None = None,
    end_at: datetime | None = None,
    strategy: str | None = None,
    description: str | None = None,
) -> dict[str, object]:
    """The common fields to change, by name: the window when either end changes (both ends,
    the other one kept), the strategy, the description. ``InvalidInput`` for a window that is
    not one (``core.window.window_validate``) or a strategy that names none."""
    changes: dict[str, object] = {}
    if begin_at is not None or end_at is not None:
        changes["begin_at"], changes["end_at"] = begin_at or item.begin_at, end_at or item.end_at
        window_validate(changes["begin_at"], changes["end_at"])
    if strategy is not None:
        changes["strategy"] = strategy_valid(strategy)
    if description is not None:
        changes["description"] = description
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
    rules and its units changed with the database (``inventory.item_states.item_update``)."""

    @transaction.atomic
    def change() -> dict[int, int]:
        for field, value in changes.items():
            setattr(item, field, value)
        if changes:
            item.save(update_fields=list(changes))
        return {} if then is None else then()

    item_update(product, item, change, switch_to=changes.get("strategy"), units=lambda added: added)
