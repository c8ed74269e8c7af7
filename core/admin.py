"""Changelist columns that both products' admins share."""

from __future__ import annotations

from django.contrib import admin

from .moments import moment_text


class SaleWindowColumns:
    """A ``window`` column for a ``core.window.SaleWindow`` model: its state, begin and end
    on one short line. Two full date columns ("Nov. 23, 2026, 11:31 a.m.") pushed the
    voucher list's strategy and restock link out of a 1280 px screen."""

    @admin.display(description="window", ordering="begin_at")
    def window(self, obj) -> str:
        return f"{obj.window_state()}: {moment_text(obj.begin_at)} – {moment_text(obj.end_at)}"

    @admin.display(description="strategy", ordering="strategy")
    def strategy_name(self, obj) -> str:
        # The name (db_atomic), not the choice's long label: the filter beside the list
        # already explains each one.
        return obj.strategy


class CreatedColumn:
    """A ``created`` column in the format of every page (``core.moments``), in place of the
    admin's own ("Nov. 23, 2026, 11:31 a.m.", no zone)."""

    @admin.display(description="created", ordering="created_at")
    def created(self, obj) -> str:
        return moment_text(obj.created_at)
