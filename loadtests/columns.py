"""The matrix's columns: which of a run's figures (``verdict.Result``) it shows, and under
which heading, by the runs it holds."""

from __future__ import annotations

from .verdict import Result, lifecycle

# The matrix: (Result field, heading). A product's own columns read "-" on the other's rows,
# and a deferred strategy's (202s, pending at end, drain s) on the other strategies'.
# ``history``: the answers the run's history shows wrong (``loadtests.history``), 0 when clean.
COLUMNS = [
    ("scenario", "scenario"), ("strategy", "strategy"), ("requests", "requests"), ("confirmed", "confirmed"),
    ("accepted", "202s"), ("orders", "orders"), ("awarded", "awarded"), ("supplied", "supplied"),
    ("oversold", "oversold"), ("duplicates", "dup orders"), ("over_awarded", "over-awarded"),
    ("users_over_limit", "users over limit"), ("lost_confirmations", "lost"), ("stock_left", "stock left"),
    ("pending_at_end", "pending at end"), ("drain_s", "drain s"), ("rps", "req/s"), ("p50_ms", "p50 ms"),
    ("p95_ms", "p95 ms"), ("p99_ms", "p99 ms"), ("cpu_ms_per_request", "CPU ms/req"),
    ("history_violations", "history"), ("verdict", "verdict"),
]  # fmt: skip


# A lifecycle scenario's columns (``verdict.Result``), after the others' and before the
# verdict, in the matrix only when one of its rows is a lifecycle scenario's.
LIFECYCLE_COLUMNS = [
    ("settled", "paid/claimed"), ("released", "released"), ("resold", "resold"),
    ("returned_twice", "returned twice"), ("settled_and_released", "settled+released"),
    ("unsettled_200s", "200s unsettled"), ("charges", "charges"), ("refunds", "refunds"),
    ("payments_off", "payments off"), ("returns_unsold", "returns unsold"), ("held_left", "held left"),
    ("holds_drain_s", "holds drain s"),
]  # fmt: skip


# A run on buckets' columns (``verdict.Result``), after the strategy's, in the matrix only
# when one of its rows is split into buckets.
BUCKET_COLUMNS = [("buckets", "buckets"), ("sales_per_second", "sales/s"), ("stranded", "stranded")]


# A waiting room's columns (``loadtests.admissions``), before the verdict, in the matrix only
# when one of its rows passed one.
QUEUE_COLUMNS = [
    ("admitted", "admitted"), ("told_sold_out", "told sold out"), ("inversions_percent", "inversions %"),
    ("longest_wait_s", "longest wait s"),
]  # fmt: skip


def columns_of(results: list[Result]) -> list[tuple[str, str]]:
    """The matrix's columns: ``COLUMNS``, with ``BUCKET_COLUMNS`` after the strategy when a row
    is bucketed, and ``LIFECYCLE_COLUMNS`` and ``QUEUE_COLUMNS`` before the verdict when a row
    has them."""
    columns = COLUMNS
    if any(result.buckets > 1 for result in results):
        columns = columns[:2] + BUCKET_COLUMNS + columns[2:]
    if any(lifecycle(result) for result in results):
        columns = columns[:-1] + LIFECYCLE_COLUMNS + columns[-1:]
    if any(result.admitted is not None for result in results):
        columns = columns[:-1] + QUEUE_COLUMNS + columns[-1:]
    return columns
