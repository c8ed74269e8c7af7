from __future__ import annotations

from django.conf import settings
from django.db import models


class Strategy(models.TextChoices):
    """The concurrency strategies, one name each, used everywhere (docs/design.md, "Strategies").

    The one list of their names: the registry (``inventory.strategies.STRATEGIES``) must
    name the same ones in the same order, or importing it fails.
    """

    NONE = "none", "none: naive read-check-write (oversells)"
    LOCAL = "local", "local: process-local lock (oversells across processes)"
    DB_PESSIMISTIC = "db_pessimistic", "db_pessimistic: SELECT ... FOR UPDATE"
    DB_OPTIMISTIC = "db_optimistic", "db_optimistic: version compare-and-set"
    DB_ATOMIC = "db_atomic", "db_atomic: conditional UPDATE"
    REDIS_LOCK = "redis_lock", "redis_lock: per-item and per-user Redis locks"
    REDLOCK = "redlock", "redlock: the same locks on a majority of Redis servers"
    REDIS_LUA = "redis_lua", "redis_lua: one Lua script reserves in Redis, Celery writes the order"


def strategy_choices() -> list[tuple[str, str]]:
    """The choices of every ``strategy`` field (``orders.Voucher``, ``lottery.Pool``).

    A callable, so that migrations record its path rather than the list: a strategy added
    to ``Strategy`` needs no migration.
    """
    return Strategy.choices


def default_strategy() -> str:
    return settings.DEFAULT_STRATEGY


class StockGroup(models.Model):
    """The stock rows that one take chooses among: a voucher's (one, or one per bucket), or every
    prize of a pool; the item owns it (``Voucher.group``, ``Pool.group``), and each record
    says which row it took (``Order.stock``, ``Draw.stock``). It is the unit of concurrency
    control: ``db_pessimistic`` locks its rows, ``db_optimistic`` compares its version,
    ``redis_lock`` locks its name; of a bucketed item, each bucket's rows, row and name
    (``inventory.buckets``).
    """

    version = models.PositiveBigIntegerField(
        default=0,
        help_text="Bumped by db_optimistic's writes and by every restock; db_optimistic compares it before writing.",
    )
    # Running totals of the takes beyond the per-user rule (inventory.totals): the takes a
    # user holds past the item's limit, summed over users, and the users who hold any. Only
    # ``none`` and ``local`` write past the rule, so only their writes move these; they are
    # what the shop's pages flag without counting every record.
    over_takes = models.PositiveIntegerField(default=0, editable=False)
    over_takers = models.PositiveIntegerField(default=0, editable=False)

    def __str__(self) -> str:
        return f"stock group {self.pk}"


class Stock(models.Model):
    """A countable quantity of one item, shared by vouchers and prizes.

    ``quantity`` is written only by the strategies (``inventory.strategies``: a take's
    ``units_out``, a release's return ``units_return``, one record's or an expiry's batch;
    ``redis_lua``'s worker when it writes its reservations, ``inventory.persist``) and by a
    restock (``inventory.services``); the admin shows it read-only.
    """

    group = models.ForeignKey(StockGroup, on_delete=models.PROTECT, related_name="stocks")
    # Which of its item's buckets the row belongs to (``inventory.buckets``): 0 for an item
    # sold from one. A take reads and guards only its bucket's rows, and a row never
    # changes bucket, so a lock named after the bucket always covers the same rows.
    bucket = models.PositiveSmallIntegerField(default=0, editable=False)
    # The row whose units this row holds a share of: every row of one thing that is taken
    # by its own weight among others (a pool's prize, one row per bucket) names that
    # thing's bucket-0 row, the bucket-0 row itself included, so that its rows are made,
    # restocked and read together by one key (``inventory.services.stock_shares_create``,
    # ``inventory.totals.stock_sums``). NULL where the group is the one thing (a voucher's rows).
    head = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="shares", editable=False
    )
    quantity = models.IntegerField(help_text="Units left to sell or award.")
    initial_quantity = models.IntegerField(
        help_text="Initial stock plus every restock: the total that orders and stock must add up to."
    )
    # A running total, written in the same UPDATE as ``quantity`` by every take and return
    # (inventory.totals): the units of this row that records hold (held or settled). With
    # it the pages show what is sold and whether stock + taken == supply without counting
    # the records; the audit counts them, and checks this total too.
    taken = models.IntegerField(default=0, editable=False, help_text="Units held or settled by records.")
    version = models.PositiveBigIntegerField(default=0, help_text="Bumped by every write of this row.")
    fence = models.PositiveBigIntegerField(
        default=0, help_text="The newest lock fence that wrote this row; older holders are refused."
    )

    class Meta:
        indexes = [models.Index(fields=["group", "bucket"], name="stock_group_bucket")]
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


class LostCounterFloor(models.Model):
    """Where the ``redis_lua`` reservation counter of one state of a group (``bucket`` 0: an
    unbucketed group's one state) last started after Redis lost it: the next loss starts
    past it, since what that counter handed out may be gone with Redis before the database
    holds any of it (``inventory.redis_lua.numbering``)."""

    group = models.ForeignKey(StockGroup, on_delete=models.CASCADE, related_name="lost_counter_floors")
    bucket = models.PositiveSmallIntegerField()
    floor = models.PositiveBigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "bucket"], name="lost_counter_floor_state")]

    def __str__(self) -> str:
        return f"state {self.bucket} of {self.group}: lost counter from {self.floor}"


class Abandoned(models.Model):
    """One user's running count of the held takes they abandoned (cancelled, or let lapse) of
    one item, its stock group's, and when the last was (docs/design.md, "Abandoned holds"):
    the item's cap and cooldown are checked against this one row, never by counting the
    user's records. Written by every release, in its transaction (docs/design.md, "Abandoned holds")."""

    # No foreign key in the database: a release counts here after it locked the stock rows,
    # and the key's check would take a shared lock on the group's row then, which every other
    # writer of both locks first (a db_optimistic take holds it while it waits for the stock
    # row): the two would deadlock. Deleted with its group by Django all the same.
    group = models.ForeignKey(StockGroup, on_delete=models.CASCADE, related_name="abandoned", db_constraint=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    holds = models.PositiveIntegerField(default=0)
    last_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "user"], name="abandoned_one_per_user")]

    def __str__(self) -> str:
        return f"{self.holds} abandoned by user {self.user_id} in {self.group}"
