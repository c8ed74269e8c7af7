"""The abstract models that every product builds on: the item it takes stock for (a
voucher, a pool) and its record of one take (an order, a draw). Each concrete model adds
its own fields and its constraints, named after itself."""

from __future__ import annotations

from django.db import models

from core.window import SaleWindow

from .models import default_strategy, strategy_choices


class Item(SaleWindow):
    """Abstract: what users take from within its window, under ``strategy``. The product
    adds its name, its stock, and its window's check constraint."""

    description = models.TextField(blank=True)
    strategy = models.CharField(max_length=32, choices=strategy_choices, default=default_strategy)
    # The race lab's fresh items share the shop's database but are not for sale or show there.
    listed = models.BooleanField(
        default=True,
        help_text="Shown in the shop's lists and the API's list; the race lab's and load tests' own items are not.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["begin_at", "id"]


class Record(models.Model):
    """Abstract: one take by one user, written by a strategy, or under ``redis_lua``
    persisted from a reservation that was answered (202) before the row existed. The
    product adds its user (the reverse name is its own: ``user.orders``, ``user.draws``),
    the item taken from, and its backstop against the per-user rule."""

    class Status(models.TextChoices):
        CONFIRMED = "confirmed", "confirmed"
        # redis_lua's: reserved in Redis, not written yet, and undone for good. Neither is
        # ever a row: a pending or failed record is read from Redis (the product's selectors).
        PENDING = "pending", "pending"
        FAILED = "failed", "failed"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CONFIRMED)
    # The redis_lua reservation this record was persisted from: the id the API answered
    # with (202), unique so that a reservation delivered twice writes one record.
    reservation = models.BigIntegerField(null=True, blank=True, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    # Why a failed record failed (not a column: only read from Redis).
    why = ""

    @property
    def public_id(self) -> int:
        """The id the user knows the record by: the reservation's under ``redis_lua`` (the
        202 answered it before the row existed), the row's otherwise."""
        return self.reservation or self.pk
