"""The abstract models that every product builds on: the item it takes stock for (a
voucher, a pool) and its record of one take (an order, a draw). Each concrete model adds
its own fields and its constraints, named after itself."""

from __future__ import annotations

from django.core.validators import MaxValueValidator
from django.db import models

from core.window import SaleWindow

from .models import default_strategy, strategy_choices

# The longest a unit is held for a payment or a claim: a day.
MAX_HOLD_SECONDS = 86_400


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
    # The hold window (docs/design.md, "Lifecycle"): a voucher's payment window, a pool's
    # claim window, as the API names them.
    hold_seconds = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(MAX_HOLD_SECONDS)],
        help_text="How long a take's unit is held for its payment (a voucher) or its claim (a prize); "
        "0: settled when taken.",
    )

    class Meta:
        abstract = True
        ordering = ["begin_at", "id"]
        # The redis_lua items whose sale has not ended (``inventory.items.items_live``), read by
        # every list of a user's records and the periodic tasks: the live ones, not every item
        # there ever was (the race lab and the load tests make new ones on every run).
        indexes = [models.Index(fields=["strategy", "end_at"], name="%(class)s_live")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(hold_seconds__lte=MAX_HOLD_SECONDS), name="%(class)s_hold_bounded"
            ),
        ]


class Record(models.Model):
    """Abstract: one take by one user, written by a strategy, or under ``redis_lua``
    persisted from a reservation that was answered (202) before the row existed. The
    product adds its user (the reverse name is its own: ``user.orders``, ``user.draws``),
    the item taken from, and its backstop against the per-user rule."""

    class Status(models.TextChoices):
        # Settled when taken: an item without a hold window, or a draw of no prize.
        CONFIRMED = "confirmed", "confirmed"
        # Taken, its unit held for the user until ``hold_until`` (docs/design.md, "Lifecycle").
        HELD = "held", "held"
        # Settled from held: a voucher paid for, a prize claimed.
        PAID = "paid", "paid"
        CLAIMED = "claimed", "claimed"
        # Released from held, the unit back in stock: by the user, or at ``hold_until``.
        CANCELLED = "cancelled", "cancelled"
        EXPIRED = "expired", "expired"
        FORFEITED = "forfeited", "forfeited"
        # redis_lua's: reserved in Redis, not written yet, and undone for good. Neither is
        # ever a row: a pending or failed record is read from Redis (the product's selectors).
        PENDING = "pending", "pending"
        FAILED = "failed", "failed"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CONFIRMED)
    # The redis_lua reservation this record was persisted from: the id the API answered
    # with (202), unique so that a reservation delivered twice writes one record.
    reservation = models.BigIntegerField(null=True, blank=True, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # A held record's deadline (a voucher's pay_by, a prize's claim_by); None when it was
    # settled when taken.
    hold_until = models.DateTimeField(null=True, blank=True, editable=False)
    # When it was settled (paid, claimed) from held, and when its unit went back to the
    # stock. A guarded strategy writes at most one of the two; ``releases`` counts the
    # returns of its unit, which a guarded strategy makes at most once.
    settled_at = models.DateTimeField(null=True, blank=True, editable=False)
    released_at = models.DateTimeField(null=True, blank=True, editable=False)
    releases = models.PositiveSmallIntegerField(default=0, editable=False)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    # Why a failed record failed (not a column: only read from Redis).
    why = ""

    @property
    def is_held(self) -> bool:
        return self.status == self.Status.HELD

    @property
    def public_id(self) -> int:
        """The id the user knows the record by: the reservation's under ``redis_lua`` (the
        202 answered it before the row existed), the row's otherwise."""
        return self.reservation or self.pk


# The statuses of a record whose unit went back to the stock, and of one settled.
RELEASED = (Record.Status.CANCELLED, Record.Status.EXPIRED, Record.Status.FORFEITED)
SETTLED = (Record.Status.CONFIRMED, Record.Status.PAID, Record.Status.CLAIMED)
# The statuses of a record that holds its unit: the stock row's running total ``taken``
# counts them (inventory.totals), and the audits count them.
TAKING = (Record.Status.HELD, *SETTLED)
