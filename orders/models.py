from __future__ import annotations

from django.conf import settings
from django.db import models

from inventory.models import Stock, StockGroup
from inventory.records import Item, Record


class Voucher(Item):
    """A flash-sale item: one order per user, sold within ``begin_at``..``end_at``.

    Its stock is the rows of its stock group (``group``), as a pool's, taken under
    ``strategy``: one row today, several later. Its orders say which row each took.
    """

    title = models.CharField(max_length=200)
    group = models.OneToOneField(StockGroup, on_delete=models.PROTECT, related_name="voucher", editable=False)

    class Meta(Item.Meta):
        constraints = [
            *Item.Meta.constraints,
            models.CheckConstraint(condition=models.Q(end_at__gt=models.F("begin_at")), name="voucher_window_ordered"),
        ]

    def __str__(self) -> str:
        return self.title


class Order(Record):
    """One purchase of one voucher by one user."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="orders")
    voucher = models.ForeignKey(Voucher, on_delete=models.PROTECT, related_name="orders")
    # The stock row of the voucher's group that the order took its unit from: every
    # order took one (NULL only in the column's type, which it shares with a draw's).
    stock = models.ForeignKey(
        Stock, on_delete=models.PROTECT, related_name="orders", null=True, blank=True, editable=False
    )
    # The user's id when a guarded strategy wrote the order, NULL when ``none`` or
    # ``local`` did. Unique with the voucher: MySQL has no partial unique index,
    # and NULLs never collide, so this is the one-per-user backstop that the naive
    # strategies can bypass and every other strategy writes through.
    buyer_guard = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta(Record.Meta):
        constraints = [
            models.UniqueConstraint(fields=["voucher", "buyer_guard"], name="order_one_per_user"),
        ]
        indexes = [
            # With the status, a voucher's orders that count against the limit are counted (the
            # beat's reconciliation), and a buyer's found (the take's check), from the index alone.
            models.Index(fields=["voucher", "user", "status"], name="order_voucher_user_status"),
            # The holds due, every voucher's in deadline order: the sweep's (inventory.holds).
            models.Index(fields=["status", "hold_until", "voucher"], name="order_hold_due"),
            # One voucher's holds due, in deadline order: its expiry's, which reads no other
            # voucher's due holds (the index above reads every one due before its own).
            models.Index(fields=["voucher", "status", "hold_until"], name="order_item_hold_due"),
            # A user's orders newest first, a page read from the index alone (inventory.paging).
            models.Index(fields=["user", "created_at", "id"], name="order_user_created"),
            # The admin's list, newest first (Record.Meta.ordering): it reads its page from here.
            models.Index(fields=["-created_at", "-id"], name="order_created"),
        ]

    def __str__(self) -> str:
        # Names, not ids: the admin titles a record's page with it. Its pages fetch the voucher
        # and the user with the orders they show (RecordAdmin.list_prefetch).
        return f"Order {self.public_id} of {self.voucher.title} by {self.user.get_username()}"
