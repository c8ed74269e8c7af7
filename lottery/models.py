from __future__ import annotations

from django.conf import settings
from django.db import models

from inventory.models import Stock, StockGroup
from inventory.records import Item, Record


class Pool(Item):
    """A prize draw: each draw wins prize i with probability
    ``stock_i / (sum of stock + no_prize_weight)``, within ``begin_at``..``end_at``,
    at most ``draws_per_user`` times per user.

    Its prizes' stock rows form one stock group (``group``), taken under ``strategy``.
    """

    name = models.CharField(max_length=200)
    draws_per_user = models.PositiveIntegerField(default=1, help_text="Draws each user may make in this pool.")
    no_prize_weight = models.PositiveIntegerField(
        default=0, help_text='The weight of "no prize", counted like units of stock that are never used up.'
    )
    group = models.OneToOneField(StockGroup, on_delete=models.PROTECT, related_name="pool", editable=False)

    class Meta(Item.Meta):
        constraints = [
            *Item.Meta.constraints,
            models.CheckConstraint(condition=models.Q(end_at__gt=models.F("begin_at")), name="pool_window_ordered"),
            models.CheckConstraint(condition=models.Q(draws_per_user__gte=1), name="pool_draws_per_user_positive"),
        ]

    def __str__(self) -> str:
        return self.name


class Prize(models.Model):
    """One prize of a pool, with its stock rows in the pool's stock group: one per bucket of the
    pool, its units spread over them. ``stock`` is the bucket-0 row, which every row of the
    prize names as its head (``Stock.head``): read them summed through
    ``lottery.selectors.prizes_stocked``."""

    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="prizes")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    value = models.DecimalField(max_digits=12, decimal_places=2, default=0, help_text="What the prize is worth.")
    stock = models.OneToOneField(Stock, on_delete=models.PROTECT, related_name="prize", editable=False)

    class Meta:
        ordering = ["pool", "id"]

    def __str__(self) -> str:
        return self.name


class Draw(Record):
    """One draw by one user in one pool: a prize, or none ("no prize")."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="draws")
    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="draws")
    prize = models.ForeignKey(Prize, on_delete=models.PROTECT, related_name="draws", null=True, blank=True)
    # The stock row the draw took its unit from, the prize's: NULL for "no prize".
    stock = models.ForeignKey(
        Stock, on_delete=models.PROTECT, related_name="draws", null=True, blank=True, editable=False
    )
    # The user's n-th draw in this pool, n counted when the draw was checked: at most
    # the pool's limit. With ``user_guard`` it is the per-user limit's backstop.
    seq = models.PositiveIntegerField(editable=False)
    # The user's id when a guarded strategy wrote the draw, NULL when ``none`` or
    # ``local`` did. Two draws that counted the same earlier draws carry the same
    # ``seq``, so the unique key refuses the second; NULLs never collide, which lets
    # the naive strategies exceed the limit, as the demonstration needs.
    user_guard = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta(Record.Meta):
        constraints = [
            models.UniqueConstraint(fields=["pool", "user_guard", "seq"], name="draw_one_per_seq"),
            models.CheckConstraint(condition=models.Q(seq__gte=1), name="draw_seq_positive"),
        ]
        indexes = [
            models.Index(fields=["pool", "user"], name="draw_pool_user"),
            # The holds due, as a voucher's orders' (orders.models.Order): every pool's in
            # deadline order for the sweep, one pool's for its expiry (inventory.holds).
            models.Index(fields=["status", "hold_until", "pool"], name="draw_hold_due"),
            models.Index(fields=["pool", "status", "hold_until"], name="draw_item_hold_due"),
            # A user's draws newest first, a page read from the index alone (inventory.paging).
            models.Index(fields=["user", "created_at", "id"], name="draw_user_created"),
            # The admin's list, newest first (Record.Meta.ordering): it reads its page from here.
            models.Index(fields=["-created_at", "-id"], name="draw_created"),
        ]

    # Not columns: on a draw just made, the user's draws in the pool counting this one and
    # the limit they were counted against.
    draws_counted = 0
    draws_limit = 0

    def __str__(self) -> str:
        # Names, not ids, as an order's (orders.models.Order.__str__).
        return f"Draw {self.public_id} in {self.pool.name} by {self.user.get_username()}"
