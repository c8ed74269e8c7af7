"""A lab run (the proof, run from the web UI) and its lanes, one per strategy compared.

A run is created by staff on ``/lab/``, executed by a Celery task that drives Locust at
this same server, and kept afterwards: its parameters, the commit and machine it ran
on, and every lane's figures and series, so that ``/proof/`` can show the latest.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from inventory.texts import Described, described
from loadtests.scenarios import ALL, HOLD_SECONDS
from loadtests.verdict import Result, counted_breaks

from .lifecycle import lifecycle_cells


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
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # Where Locust sends its requests: this same server, as the browser that started the run reached it.
    target_url = models.CharField(max_length=200)
    # What the server did between the check and the write, and how many processes served.
    race_window_ms = models.PositiveIntegerField(default=0)
    server_processes = models.PositiveIntegerField(default=1)
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

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(duration__gte=1, duration__lte=60), name="lab_run_duration_bounded"
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
    def hold_seconds(self) -> int:
        """Its items' hold window: the lab's lifecycle runs hold each take as ``make loadtest`` does."""
        return HOLD_SECONDS if self.lifecycle else 0

    @property
    def lifecycle_labels(self) -> list[str]:
        """The lifecycle's columns of its matrix ([] for another scenario's run)."""
        if not self.lifecycle:
            return []
        return [label for label, _, _ in lifecycle_cells(self.product, {"returned_twice": 0})]

    @property
    def figure_columns(self) -> int:
        """How many columns of its matrix hold a lane's figures (what a lane not run spans)."""
        return len(self.break_labels) + 5 + len(self.lifecycle_labels)

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
    # Once audited: the verdict and every figure of the matrix row.
    verdict = models.CharField(max_length=300, blank=True)
    expected_to_break = models.BooleanField(default=False)
    ok = models.BooleanField(default=False)
    figures = models.JSONField(default=dict)

    class Meta:
        ordering = ["run", "position"]
        constraints = [models.UniqueConstraint(fields=["run", "position"], name="lab_lane_one_per_position")]

    def __str__(self) -> str:
        return f"{self.run_id}/{self.strategy}"

    @property
    def broken(self) -> bool:
        return any(count > 0 for _, count in self.breaks) or any(bad for _, _, bad in self.lifecycle_cells)

    @property
    def lifecycle_cells(self) -> list[tuple[str, object, bool]]:
        """(label, value, unsafe) of its lifecycle figures, once audited ([] before, and
        for another scenario's lane)."""
        return lifecycle_cells(self.run.product, self.figures or {})

    @property
    def verdict_short(self) -> str:
        """The verdict without its list of what broke ("broke as expected", "holds"), or
        the lane's status while it has none."""
        return self.verdict.partition(":")[0] if self.verdict else self.get_status_display().lower()

    @property
    def state(self) -> str:
        """What the lane's card shows: ``broken`` as soon as a counted invariant is above 0,
        else ``waiting``, ``failed``, ``not_run``, ``cancelled`` or ``holding`` (running or
        finished with none broken)."""
        if self.broken:
            return "broken"
        if self.status in (self.Status.WAITING, self.Status.FAILED, self.Status.NOT_RUN, self.Status.CANCELLED):
            return self.status
        return "holding"

    @property
    def strategy_info(self) -> Described | None:
        """The registry's strategy as the pages show it (its explanation, whether it is
        expected to break); None for a strategy since removed."""
        return described(self.strategy)
