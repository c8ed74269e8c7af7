"""When a sale's keys leave Redis: ``RESERVATIONS_CLOSE_AFTER_END_SECONDS`` after its end, a
close (``inventory.redis_lua.item_states.item_reservations_close``) persists what still
waits and removes every key of the item's states. Read by the close's beat, and by the
reconciliation and the audit, which expect no state of a closed item and rebuild none."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from ..models import Strategy


def close_cutoff(now: datetime | None = None) -> datetime:
    """A sale that ended at or before this has had its Redis keys removed, or soon will."""
    return (now or timezone.now()) - timedelta(seconds=settings.RESERVATIONS_CLOSE_AFTER_END_SECONDS)


def item_closed(item: Any) -> bool:
    return item.end_at <= close_cutoff()


def item_keeps_state(item: Any) -> bool:
    """Whether the item has a Redis state to load, check and rebuild: ``redis_lua``, not closed."""
    return item.strategy == Strategy.REDIS_LUA and not item_closed(item)
