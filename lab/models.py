"""A lab run (the proof, run from the web UI) and its lanes, one per strategy compared.

A run is created by staff on ``/lab/``, executed by a Celery task that drives Locust at
this same server, and kept afterwards: its parameters, the commit and machine it ran
on, and every lane's figures and series, so that ``/proof/`` can show the latest.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from inventory.records import MAX_BUCKETS
from inventory.texts import Described, described
from loadtests.sales import sales_per_second
from loadtests.scenarios import ALL
from loadtests.verdict import PROVES_NOTHING, Result, bucketed_name, counted_breaks

from .lifecycle import lifecycle_cells, surge_cells, taken_text


@dataclass(frozen=True)
class SideBySide:
    """One strategy of a bucketed run: its sale from one row and from buckets."""

    row: LabLane
    split: LabLane

    @property
    def strategy(self) -> str:
        return self.row.strategy

    @property
    def ratio(self) -> float | None:
        """The buckets' sales per second over one row's (None while one row has sold nothing)."""
        row = self.row.sales_per_second
        return self.split.sales_per_second / row if row else None


class LabRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Product(models.TextChoices):
        VOUCHER = "voucher", "Flash sale"
        POOL = "pool", "Prize draw"

    product = models.CharField(max_length=16, choices=Product.choices)
    scenario = models.CharField(max_length=32)
    stock = models.PositiveIntegerField()
    crowd = models.PositiveIntegerField(help_text="Distinct buyers (or drawing users).")
    users = models.PositiveIntegerField(help_text="Locust users: the concurrency.")
    duration = models.PositiveIntegerField(help_text="Seconds of load per strategy.")
    # 1: each strategy sells from one row. More: each strategy sells twice, from one row and
    # from a voucher split into this many buckets, side by side (two lanes).
    buckets = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_BUCKETS)]
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # Where Locust sends its requests: this same server, as the browser that started the run reached it.
    target_url = models.CharField(max_length=200)
    # What the server did between the check and the write, and how many processes served.
    race_window_ms = models.PositiveIntegerField(default=0)
    server_processes = models.PositiveIntegerField(default=1)
    # A lifecycle run's hold of each take for its pay or claim, in seconds (0 for another run):
    # recorded with the run, so that its page and /proof/ say what it ran with, not today's.
    hold_seconds = models.PositiveIntegerField(default=0)
    database = models.CharField(max_length=32, blank=True)
    commit = models.CharField(max_length=40, blank=True)
    machine = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True)
    # A lifecycle run's: what the site's settings left out of the race (``lab.lifecycle``).
    caveat = models.TextField(blank=True)
    # The run's folder under VAR_DIR/lab/ (matrix files, report.html, Locust's reports): named
    # by time and a random part, never by id alone, which a fresh database hands out again.
    folder = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Set when staff put this run on /proof/ (which otherwise shows only a complete run of
    # every strategy at the default size).
    published_at = models.DateTimeField(null=True, blank=True)
    # The proof on /proof/ it can stand for (``lab.proofs``), written as it finishes: "" for none.
    proves = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        # What /proof/ reads: the latest run of a proof, and the latest one published
        # (``lab.selectors._latest``); and the lab the run going on.
        indexes = [
            models.Index(fields=["status", "finished_at"], name="lab_run_status_finished"),
            models.Index(fields=["proves", "finished_at"], name="lab_run_proves"),
            models.Index(fields=["published_at"], name="lab_run_published"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(duration__gte=1, duration__lte=60), name="lab_run_duration_bounded"
            ),
            models.CheckConstraint(
                condition=models.Q(buckets__gte=1, buckets__lte=MAX_BUCKETS), name="lab_run_buckets_bounded"
            ),
        ]

    def __str__(self) -> str:
        return f"Lab run {self.pk} ({self.get_product_display()}, {self.scenario})"

    @property
    def active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

    @property
    def untried(self) -> str:
        """The counted invariant this run's scenario does not try (nobody buys twice in a
        crowd that buys once each), or "" when it tries both."""
        scenario = ALL.get(self.scenario)
        return self.break_labels[1] if scenario is not None and not scenario.repeats else ""

    @property
    def lifecycle(self) -> bool:
        """Whether its scenario is the lifecycle's: its lanes have holds and their figures."""
        scenario = ALL.get(self.scenario)
        return scenario is not None and scenario.lifecycle

    @property
    def lifecycle_labels(self) -> list[str]:
        """The lifecycle's columns of its matrix ([] for another scenario's run)."""
        if not self.lifecycle:
            return []
        return [label for label, _, _ in lifecycle_cells(self.product, {"returned_twice": 0})]

    @property
    def bucketed(self) -> bool:
        """Whether each strategy sold from one row and from buckets, side by side."""
        return self.buckets > 1

    @property
    def side_by_side(self) -> list[SideBySide]:
        """Each strategy of a bucketed run: its lane on one row and its lane on buckets
        ([] for another run)."""
        if not self.bucketed:
            return []
        lanes = list(self.lanes.all())
        rows = {lane.strategy: lane for lane in lanes if lane.buckets == 1}
        return [SideBySide(rows[lane.strategy], lane) for lane in lanes if lane.buckets > 1 and lane.strategy in rows]

    @property
    def bucket_ratios(self) -> tuple[float | None, float | None]:
        """The lowest and highest of its strategies' sales per second on buckets over one
        row's (None, None) where none has both."""
        ratios = [pair.ratio for pair in self.side_by_side if pair.ratio is not None]
        return (min(ratios), max(ratios)) if ratios else (None, None)

    @property
    def stranded_on_buckets(self) -> int:
        """Units stranded by all of its lanes on buckets."""
        return sum(pair.split.stranded or 0 for pair in self.side_by_side)

    @property
    def figure_columns(self) -> int:
        """How many columns of its matrix hold a lane's figures (what a lane not run spans)."""
        return len(self.break_labels) + 5 + len(self.lifecycle_labels) + (2 if self.bucketed else 0)

    @property
    def break_labels(self) -> list[str]:
        """The product's counted invariants, in the verdict's order: the matrix's columns."""
        return [label for label, _ in counted_breaks(Result(scenario=self.scenario, strategy="", product=self.product))]


class LabLane(models.Model):
    """One strategy of a run: its figures while Locust runs, then its audit verdict."""

    class Status(models.TextChoices):
        WAITING = "waiting"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        # Its run was cancelled: while it ran (its crowd stopped, its figures are up to
        # then), or before its turn.
        CANCELLED = "cancelled"
        NOT_RUN = "not_run", "not run"

    run = models.ForeignKey(LabRun, on_delete=models.CASCADE, related_name="lanes")
    position = models.PositiveIntegerField()
    strategy = models.CharField(max_length=32)
    # The rows its item's stock was split into: 1, or the run's buckets on the second lane
    # of a strategy in a bucketed run.
    buckets = models.PositiveSmallIntegerField(default=1)
    # The lane's fresh voucher or pool (its page shows what it sold beyond its stock).
    item_id = models.PositiveBigIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.WAITING)
    elapsed = models.FloatField(default=0)
    supplied = models.IntegerField(default=0)
    taken = models.IntegerField(default=0, help_text="Orders, or prizes awarded.")
    stock_left = models.IntegerField(default=0)
    # The product's counted invariants, live: oversold and duplicate orders, or
    # over-awarded prizes and users over the draw limit. Above 0 is a break.
    breaks = models.JSONField(default=list, help_text="[[label, count], ...]")
    rps = models.FloatField(default=0)
    p95_ms = models.FloatField(default=0)
    taken_series = models.JSONField(default=list)
    supply_series = models.JSONField(default=list)
    # [[seconds, [units left in bucket 0, bucket 1, ...]], ...]: one query over the item's
    # rows per sample.
    bucket_series = models.JSONField(default=list)
    # Once audited: the verdict and every figure of the matrix row.
    verdict = models.CharField(max_length=300, blank=True)
    expected_to_break = models.BooleanField(default=False)
    ok = models.BooleanField(default=False)
    figures = models.JSONField(default=dict)

    class Meta:
        ordering = ["run", "position"]
        constraints = [models.UniqueConstraint(fields=["run", "position"], name="lab_lane_one_per_position")]

    def __str__(self) -> str:
        return f"{self.run_id}/{self.key}"

    @property
    def key(self) -> str:
        """Its name within its run (its folder, anchor and Locust report's): the strategy, with
        its buckets when split (``db_atomic-8-buckets``)."""
        return bucketed_name(self.strategy, self.buckets)

    @property
    def shape(self) -> str:
        """What its item sold from, in a bucketed run ("one row", "8 buckets"); "" in another."""
        if not self.run.bucketed:
            return ""
        return "one row" if self.buckets == 1 else f"{self.buckets} buckets"

    @property
    def sales_per_second(self) -> float:
        """Units taken per second while it sold, from its series (live, then final)."""
        return sales_per_second(self.taken_series)

    @property
    def stranded(self) -> int | None:
        """Units left at the end while buyers were told sold out, once audited (None before,
        and where not counted: ``loadtests.sales.stranded_units``)."""
        return (self.figures or {}).get("stranded")

    @property
    def broken(self) -> bool:
        """Whether it broke something: a counted invariant above 0 (live), a lifecycle, surge
        or bucket figure, or, once judged, a safe strategy's failed verdict, whatever it names
        (stock not adding up, confirmations lost, the history, Redis' drift, answers no
        document lists): those have no counter on the card, which showed them holding."""
        return (
            any(count > 0 for _, count in self.breaks)
            or any(bad for _, _, bad in self.lifecycle_cells)
            or any(bad for _, _, bad in self.surge_cells)
            or bool(self.buckets > 1 and self.stranded)
            or (
                self.status == self.Status.DONE
                and bool(self.verdict)
                and not self.ok
                and not self.expected_to_break
                and not self.unproven
            )
        )

    @property
    def unproven(self) -> bool:
        """Judged neither way (``loadtests.verdict.PROVES_NOTHING``): a safe lane audited while
        its figures still changed or that took nothing ("NOT PROVEN"), an unsafe one that did
        not reproduce the race, or one nothing answered: it proves nothing, holding or broken."""
        return self.verdict.startswith(PROVES_NOTHING)

    @property
    def taken_text(self) -> str:
        return taken_text(self.run.product, self.taken, self.supplied, self.figures or {}, lifecycle=self.run.lifecycle)

    @property
    def lifecycle_cells(self) -> list[tuple[str, object, bool]]:
        """(label, value, unsafe) of its lifecycle figures, once audited ([] before, and
        for another scenario's lane)."""
        return lifecycle_cells(self.run.product, self.figures or {})

    @property
    def surge_cells(self) -> list[tuple[str, object, bool]]:
        """(label, value, bad) of a surge lane's figures, once audited ([] before, and for
        another scenario's lane)."""
        return surge_cells(self.run.scenario, self.figures or {})

    @property
    def verdict_short(self) -> str:
        """The verdict without its list of what broke ("broke as expected", "holds"), or
        the lane's status while it has none."""
        return self.verdict.partition(":")[0] if self.verdict else self.get_status_display().lower()

    @property
    def state(self) -> str:
        """What the lane's card shows: ``broken`` as soon as a counted invariant is above 0,
        else ``unproven`` (judged neither way), ``waiting``, ``failed``, ``not_run``,
        ``cancelled`` or ``holding`` (running or finished with none broken)."""
        if self.broken:
            return "broken"
        if self.unproven:
            return "unproven"
        if self.status in (self.Status.WAITING, self.Status.FAILED, self.Status.NOT_RUN, self.Status.CANCELLED):
            return self.status
        return "holding"

    @property
    def strategy_info(self) -> Described | None:
        """The registry's strategy as the pages show it (its explanation, whether it is
        expected to break); None for a strategy since removed."""
        return described(self.strategy)
