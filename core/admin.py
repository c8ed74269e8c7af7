"""Changelist columns that both products' admins share, and the paginator of the lists that
grow with the site's history."""

from __future__ import annotations

from django.contrib import admin
from django.core.paginator import Paginator
from django.utils.functional import cached_property

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


class AtLeast(int):
    """A count that stopped at a cap: the admin prints it wherever it prints the count
    ("10000+ orders", "Select all 10000+ orders") while comparing it as the number."""

    def __str__(self) -> str:
        return f"{int(self)}+"


class CappedPaginator(Paginator):
    """Counts at most ``cap`` of the list's rows, so that a list of every order ever made
    costs the same on a site with millions: the admin's changelist counts the filtered
    list for its page links, and ``COUNT(*)`` reads every row it counts. Past the cap the
    count is ``AtLeast(cap)`` and the pages stop there: the newest ``cap`` rows, as the
    list's ordering has them; a filter or a search narrows the list to reach older ones.

    A page past the first reads its rows' ids first, then the rows: asked for whole rows
    2,900 deep in 400,000, MariaDB judged sorting the whole table cheaper than walking the
    index, while the ids alone it reads from the index at any depth. The first page is one
    query, as a list of one page is."""

    cap = 10_000

    @cached_property
    def count(self) -> int:
        # Unordered, so that the database stops after cap + 1 rows of whatever index
        # serves the filter, rather than sorting them first.
        counted = self.object_list.order_by()[: self.cap + 1].count()
        return AtLeast(self.cap) if counted > self.cap else counted

    def page(self, number):
        number = self.validate_number(number)
        if number == 1:
            return super().page(number)
        bottom = (number - 1) * self.per_page
        top = min(bottom + self.per_page, self.count)
        ids = self.object_list.prefetch_related(None).values_list("pk", flat=True)[bottom:top]
        return self._get_page(self.object_list.filter(pk__in=list(ids)), number, self)
