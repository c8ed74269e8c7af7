"""The abstract models that every product builds on: the item it takes stock for (a
voucher, a pool) and its record of one take (an order, a draw). Each concrete model adds
its own fields and its constraints, named after itself. And the ids a record is shown by
(``public_of``, ``internal_of``), which no one outside can count records with."""

from __future__ import annotations

import functools
import hashlib

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core.window import SaleWindow

from .models import default_strategy, strategy_choices
from .redis_lua.values import reservation_group

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
        indexes = [
            models.Index(fields=["strategy", "end_at"], name="%(class)s_live"),
            # The shop's lists: the listed items whose sale has not long ended (``items_shown``).
            models.Index(fields=["listed", "end_at"], name="%(class)s_shown"),
        ]
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
    # When its settle was asked while it was held before its deadline (a voucher's payment
    # accepted in time, its confirmation on the way): its lapse then is no abandoned hold
    # (``strategies.changes``, docs/design.md, "Abandoned holds"). NULL when never asked.
    settle_asked_at = models.DateTimeField(null=True, blank=True, editable=False)

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
        """The id the user knows the record by (``public_of``, below): made of the
        reservation's under ``redis_lua`` (the 202 answered it before the row existed), of
        the row's otherwise. Worked out once per instance (a take's answer and its log line
        both show it): a few microseconds each time."""
        internal = self.reservation or self.pk
        shown = self.__dict__.get("_shown_as")
        if shown is None or shown[0] != internal:
            shown = self.__dict__["_shown_as"] = (internal, public_of(internal))
        return shown[1]


# The statuses of a record whose unit went back to the stock, and of one settled.
RELEASED = (Record.Status.CANCELLED, Record.Status.EXPIRED, Record.Status.FORFEITED)
SETTLED = (Record.Status.CONFIRMED, Record.Status.PAID, Record.Status.CLAIMED)
# The statuses of a record that holds its unit: the stock row's running total ``taken``
# counts them (inventory.totals), and the audits count them.
TAKING = (Record.Status.HELD, *SETTLED)


# The ids a user knows their records by, and the ids the site keeps them under.
#
# Inside, a record is its row's primary key, or under ``redis_lua`` its reservation's id
# (``inventory.redis_lua.values.reservation_id``): both count up, one per take. Shown as they
# are, two orders a buyer makes a minute apart would say how many sold in between. So every id
# that leaves the site (an answer, a page, a cursor) is the internal one passed through a keyed
# permutation of [0, 2**63), and every id that comes in goes back through its inverse before
# any lookup: ``public_of`` and ``internal_of``, and nothing else converts.
#
# The permutation is a Feistel network over 64 bits, its rounds a keyed BLAKE2b under a key
# derived from ``SECRET_KEY`` and ``PUBLIC_ID_SALT``, walked back into [0, 2**63) where a
# round trip lands above it (cycle walking: a permutation of 2**64 restricted that way is one
# of 2**63, and every id the site makes is below 2**63). Without the secret, one public id says
# nothing of the next; with it, the server turns each back in a few microseconds, with no
# table to keep. A new ``SECRET_KEY`` gives every record a new public id: old links to a
# record then find nothing (docs/operations.md, "Rotating the secret key").

PUBLIC_ID_SALT = "inventory.records.public_id"

_ROUNDS = 4
_HALF = 32
_HALF_MASK = (1 << _HALF) - 1
# Every id, inside and out, is below this: a signed 64-bit column holds it.
ID_LIMIT = 1 << 63


@functools.lru_cache(maxsize=4)
def _round_keys(secret: str) -> tuple:
    """One keyed BLAKE2b per round, copied for each use (cheaper than keying it again)."""
    return tuple(
        hashlib.blake2b(key=hashlib.sha256(f"{PUBLIC_ID_SALT}:{secret}:{round_}".encode()).digest(), digest_size=4)
        for round_ in range(_ROUNDS)
    )


def _mix(keyed, half: int) -> int:
    one = keyed.copy()
    one.update(half.to_bytes(4, "big"))
    return int.from_bytes(one.digest(), "big")


def _forward(value: int, keys: tuple) -> int:
    left, right = value >> _HALF, value & _HALF_MASK
    for keyed in keys:
        left, right = right, left ^ _mix(keyed, right)
    return left << _HALF | right


def _backward(value: int, keys: tuple) -> int:
    left, right = value >> _HALF, value & _HALF_MASK
    for keyed in reversed(keys):
        left, right = right ^ _mix(keyed, left), left
    return left << _HALF | right


def _walked(value: int, step) -> int:
    if not 0 <= value < ID_LIMIT:
        raise ValueError(f"not a record id: {value}")
    keys = _round_keys(settings.SECRET_KEY)
    value = step(value, keys)
    while value >= ID_LIMIT:
        value = step(value, keys)
    return value


def public_of(internal: int) -> int:
    """The id a record kept under ``internal`` is shown by."""
    return _walked(internal, _forward)


def internal_of(public: int) -> int | None:
    """The id the record shown as ``public`` is kept under; None for a number no record
    could be shown by (negative, or past 2**63)."""
    if not 0 <= public < ID_LIMIT:
        return None
    return _walked(public, _backward)


def row_filter(public: int) -> dict | None:
    """The lookup of the row of the record shown as ``public``: by its reservation where it
    was one (``redis_lua``), by its primary key otherwise; None when no record could be
    shown by that number."""
    internal = internal_of(public)
    if internal is None:
        return None
    if reservation_group(internal) is None:
        return {"pk": internal, "reservation__isnull": True}  # a redis_lua row is shown by its reservation
    return {"reservation": internal}
