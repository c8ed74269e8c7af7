"""The abstract models that every product builds on: the item it takes stock for (a
voucher, a pool) and its record of one take (an order, a draw). Each concrete model adds
its own fields and its constraints, named after itself."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core.window import SaleWindow

from .models import default_strategy, strategy_choices

# The longest a unit is held for a payment or a claim: a day.
MAX_HOLD_SECONDS = 86_400

# The most buckets one item's stock is split into (``inventory.buckets``).
MAX_BUCKETS = 64

# A waiting room's bounds (``inventory.admission``): admissions per second, and how long a
# ticket lets its holder take before the next buyer is admitted in its place.
MIN_ADMISSION_RATE = 0.1
MAX_ADMISSION_RATE = 10_000.0
MIN_TICKET_SECONDS = 5
MAX_TICKET_SECONDS = 3_600
DEFAULT_ADMISSION_RATE = 10.0
DEFAULT_TICKET_SECONDS = 60


class Admission(models.TextChoices):
    """Who may take: anyone (``open``), or those the item's waiting room admitted (``queue``)."""

    OPEN = "open", "open: anyone may take"
    QUEUE = "queue", "queue: a waiting room admits buyers at a rate, each with a ticket"


# The abandoned holds a user may leave on one item before their takes of it are refused, and
# the pause after each (docs/design.md, "Abandoned holds"): by default two, and a minute,
# so that buying, abandoning and buying again cannot keep a short payment window's stock
# out of everyone else's reach.
DEFAULT_ABANDON_LIMIT = 2
DEFAULT_ABANDON_COOLDOWN_SECONDS = 60
MAX_ABANDON_LIMIT = 1000


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

    abandon_limit = models.PositiveSmallIntegerField(
        default=DEFAULT_ABANDON_LIMIT,
        validators=[MaxValueValidator(MAX_ABANDON_LIMIT)],
        help_text="How many held takes one user may abandon (cancel, or let lapse) before their takes of "
        "the item are refused; 0: no cap.",
    )
    abandon_cooldown_seconds = models.PositiveIntegerField(
        default=DEFAULT_ABANDON_COOLDOWN_SECONDS,
        validators=[MaxValueValidator(MAX_HOLD_SECONDS)],
        help_text="How long after each abandoned hold the same user's takes of the item are refused; 0: none.",
    )

    buckets = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_BUCKETS)],
        help_text="How many stock rows the item's units are spread over, each taken under its own guard "
        "(1 to 64; 1: one row, as an item is usually sold).",
    )

    # The waiting room (docs/design.md, "Admission"): with ``queue``, a take needs a ticket
    # that the item's queue hands out at ``admission_rate`` per second, each good once for
    # ``admission_ticket_seconds``.
    admission = models.CharField(
        max_length=8,
        choices=Admission.choices,
        default=Admission.OPEN,
        help_text="open: anyone may take; queue: buyers join a waiting room and take with the ticket it gives them.",
    )
    admission_rate = models.FloatField(
        default=DEFAULT_ADMISSION_RATE,
        validators=[MinValueValidator(MIN_ADMISSION_RATE), MaxValueValidator(MAX_ADMISSION_RATE)],
        help_text="With a queue: how many buyers are admitted per second (0.1 to 10,000).",
    )
    admission_ticket_seconds = models.PositiveIntegerField(
        default=DEFAULT_TICKET_SECONDS,
        validators=[MinValueValidator(MIN_TICKET_SECONDS), MaxValueValidator(MAX_TICKET_SECONDS)],
        help_text="With a queue: how long an admitted buyer's ticket lets them take, once (5 to 3,600 s).",
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
            models.CheckConstraint(
                condition=models.Q(buckets__gte=1, buckets__lte=MAX_BUCKETS), name="%(class)s_buckets_bounded"
            ),
            models.CheckConstraint(
                condition=models.Q(
                    admission__in=Admission.values,
                    admission_rate__gte=MIN_ADMISSION_RATE,
                    admission_rate__lte=MAX_ADMISSION_RATE,
                    admission_ticket_seconds__gte=MIN_TICKET_SECONDS,
                    admission_ticket_seconds__lte=MAX_TICKET_SECONDS,
                ),
                name="%(class)s_admission_bounded",
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
