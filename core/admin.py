"""Changelist columns that both products' admins share."""

from __future__ import annotations

from datetime import datetime

from django.contrib import admin
from django.utils import timezone
from django.utils.formats import date_format


def _short(moment: datetime, now: datetime) -> str:
    moment = timezone.localtime(moment)
    return date_format(moment, "j M H:i" if moment.year == now.year else "j M Y H:i")


class SaleWindowColumns:
    """A ``window`` column for a ``core.window.SaleWindow`` model: its state, begin and end
    on one short line. Two full date columns ("Nov. 23, 2026, 11:31 a.m.") pushed the
    voucher list's strategy and restock link out of a 1280 px screen."""

    @admin.display(description="window", ordering="begin_at")
    def window(self, obj) -> str:
        now = timezone.localtime()
        return f"{obj.window_state()}: {_short(obj.begin_at, now)} – {_short(obj.end_at, now)}"

    @admin.display(description="strategy", ordering="strategy")
    def strategy_name(self, obj) -> str:
        # The name (db_atomic), not the choice's long label: the filter beside the list
        # already explains each one.
        return obj.strategy
