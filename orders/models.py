from __future__ import annotations

from django.conf import settings
from django.db import models

from core.window import SaleWindow
from inventory.models import Stock, default_strategy, strategy_choices


class Voucher(SaleWindow):
    """A flash-sale item: one order per user, sold within ``begin_at``..``end_at``.

    Its stock is a group of one row (``stock.group``), taken under ``strategy``.
    """

    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    strategy = models.CharField(max_length=32, choices=strategy_choices, default=default_strategy)
    stock = models.OneToOneField(Stock, on_delete=models.PROTECT, related_name="voucher")
    # The race lab's fresh vouchers share the shop's database but are not for sale there.
    listed = models.BooleanField(
        default=True,
        help_text="Shown in the shop's lists and the API's list; the race lab's and load tests' own items are not.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["begin_at", "id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(end_at__gt=models.F("begin_at")), name="voucher_window_ordered"),
        ]

    def __str__(self) -> str:
        return self.title


class Order(models.Model):
    class Status(models.TextChoices):
        CONFIRMED = "confirmed", "confirmed"
        # redis_lua's: reserved in Redis, not written yet, and undone for good. Neither is
        # ever a row: a pending or failed order is read from Redis (orders.selectors).
        PENDING = "pending", "pending"
        FAILED = "failed", "failed"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="orders")
    voucher = models.ForeignKey(Voucher, on_delete=models.PROTECT, related_name="orders")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CONFIRMED)
    # The user's id when a guarded strategy wrote the order, NULL when ``none`` or
    # ``local`` did. Unique with the voucher: MySQL has no partial unique index,
    # and NULLs never collide, so this is the one-per-user backstop that the naive
    # strategies can bypass and every other strategy writes through.
    buyer_guard = models.BigIntegerField(null=True, blank=True, editable=False)
    # The redis_lua reservation this order was persisted from: the id the API answered
    # with (202), unique so that a reservation delivered twice writes one order.
    reservation = models.BigIntegerField(null=True, blank=True, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["voucher", "buyer_guard"], name="order_one_per_user"),
        ]
        indexes = [models.Index(fields=["voucher", "user"], name="order_voucher_user")]

    # Why a failed order failed (not a column: only read from Redis).
    why = ""

    def __str__(self) -> str:
        return f"Order {self.public_id} of {self.voucher_id} by {self.user_id}"

    @property
    def public_id(self) -> int:
        """The id the buyer knows the order by: the reservation's under ``redis_lua`` (the
        202 answered it before the row existed), the row's otherwise."""
        return self.reservation or self.pk
