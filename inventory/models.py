from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Strategy(models.TextChoices):
    """The concurrency strategies, one name each, used everywhere (DESIGN.md section 3)."""

    NONE = "none", "none: naive read-check-write (oversells)"
    LOCAL = "local", "local: process-local lock (oversells across processes)"
    DB_PESSIMISTIC = "db_pessimistic", "db_pessimistic: SELECT ... FOR UPDATE"
    DB_OPTIMISTIC = "db_optimistic", "db_optimistic: version compare-and-set"
    DB_ATOMIC = "db_atomic", "db_atomic: conditional UPDATE"
    REDIS_LOCK = "redis_lock", "redis_lock: per-item and per-user Redis locks"
    REDLOCK = "redlock", "redlock: the same locks on a majority of Redis servers"


def default_strategy() -> str:
    return settings.DEFAULT_STRATEGY


class Stock(models.Model):
    """A countable quantity of one item, shared by vouchers and prizes.

    ``quantity`` is only ever changed through ``inventory.stock`` and
    ``inventory.services``; the admin shows it read-only.
    """

    quantity = models.IntegerField(help_text="Units left to sell or award.")
    initial_quantity = models.IntegerField(
        help_text="Initial stock plus every restock: the total that orders and stock must add up to."
    )
    version = models.PositiveBigIntegerField(
        default=0, help_text="Bumped by every write; db_optimistic compares it before writing."
    )
    fence = models.PositiveBigIntegerField(
        default=0, help_text="The newest lock fence that wrote this row; older holders are refused."
    )

    class Meta:
        constraints = [
            # The backstop every strategy writes through. Naive strategies lose updates
            # (they write an absolute value), so they oversell without tripping it.
            models.CheckConstraint(condition=models.Q(quantity__gte=0), name="stock_quantity_not_negative"),
            models.CheckConstraint(
                condition=models.Q(initial_quantity__gte=0), name="stock_initial_quantity_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.quantity}/{self.initial_quantity}"


class Voucher(models.Model):
    """A flash-sale item: one order per user, sold within ``begin_at``..``end_at``."""

    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    begin_at = models.DateTimeField()
    end_at = models.DateTimeField()
    strategy = models.CharField(max_length=32, choices=Strategy.choices, default=default_strategy)
    stock = models.OneToOneField(Stock, on_delete=models.PROTECT, related_name="voucher")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["begin_at", "id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(end_at__gt=models.F("begin_at")), name="voucher_window_ordered"),
        ]

    def __str__(self) -> str:
        return self.title

    def window_state(self, now=None) -> str:
        """``upcoming``, ``live`` or ``ended`` at ``now``."""
        now = now or timezone.now()
        if now < self.begin_at:
            return "upcoming"
        if now >= self.end_at:
            return "ended"
        return "live"
