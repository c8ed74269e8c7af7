"""The verdict of one run: what it measured, and whether the strategy did what it should.

Pure functions over plain data (no Django, no I/O), so that the rules are tested on
their own (``tests/loadtests/test_verdict.py``).

A run is judged on its product's invariants (docs/design.md, "Invariants"):

- a voucher: nothing oversold, at most one order per buyer, stock + orders = supplied;
- a pool: no prize awarded beyond its supply, nobody over the draw limit, and
  stock + awards = supplied for every prize;

and, for both, every confirmation the API gave exists in the database once, as it
was announced, and no stock is below zero; no answer in the run's history is lost,
refused for want of stock while a unit was free, or contradicted by its record
(``loadtests.history``); and no unit is stranded: a sale (not the
lifecycle's, whose returns unsold say it) that told a buyer ``sold_out`` or ``pool_empty``
ends with no unit left but those supplied after that (``stranded_units``), which a bucketed
item keeps by answering sold out only when every bucket is empty (a run on one row reports
the count, and is not judged on it).

A lifecycle scenario (items with a hold window: ``abandon``, ``pay-race``,
``cancel-storm``, ``draw-abandon``, ``claim-race``) is judged once every hold has drained,
on the lifecycle too: no unit returned twice, no record both settled (paid, claimed) and
released, every 200 to a pay or a claim a paid order or claimed draw, every provider
confirmation exactly one paid order or one refund (a voucher's), no hold left, and no
released unit left in stock while buyers were told there was nothing left. A strategy
expected to break must break one of the first four there: an oversell by its takes alone
does not show the lifecycle's race.

A hoarding run (``hoarding``) is judged on its honest buyer too: with the item's cap on
abandoned holds or its cooldown on, the honest buyer must get a unit; with both off, the
run demonstrates the hoarding, and passes when the honest buyer heard ``sold_out`` ask after
ask (``HOARDED_ASKS``).

A deferred strategy (``redis_lua``) answers 202 and a worker writes the records
afterwards: it is judged once every reservation is persisted, its 202s count as
confirmations only then (each must be one record, found by its reservation), a
reservation still unwritten when the wait ran out breaks the run, and its Redis state
must agree with the database (invariant 5: Redis stock + records = supplied, Redis
takes per user = the user's records).

What to expect comes from the strategy's ``breaks`` (``inventory.strategies``): ``None``
must hold; ``"always"`` must break, or the demonstration lost its point;
``"across_processes"`` must break when the server runs several processes and is
judged as a safe strategy in one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VOUCHER = "voucher"
POOL = "pool"
# What a product's records that took a unit of stock are called.
TAKEN = {VOUCHER: "orders", POOL: "awarded"}

# The values of ``StockStrategy.breaks``.
BREAKS_ALWAYS = "always"
BREAKS_ACROSS_PROCESSES = "across_processes"

# The label of the answers a run's history shows the records contradict.
HISTORY = "history"

# What differed between a deferred strategy's Redis state and the database, by the key
# of ``Result.redis_drift`` (``inventory.redis_lua.reconcile.GroupCheck``).
REDIS_DRIFT = {
    "stock": "Redis stock != database stock",
    "takers": "Redis takes != records per user",
    "seqs_missing": "Redis take numbers missing",
}


# A verdict's first word when the audit ran while the figures still changed: neither holds nor
# broke (``Result.audit_incomplete``).
NOT_PROVEN = "NOT PROVEN"
# The first words of an unsafe strategy's verdict when it broke nothing the race breaks, and of
# a run nothing answered: each proves nothing either way, as NOT PROVEN does.
FAILED_TO_REPRODUCE = "FAILED TO REPRODUCE"
NO_REQUESTS = "NO REQUESTS"
PROVES_NOTHING = (NOT_PROVEN, FAILED_TO_REPRODUCE, NO_REQUESTS)


@dataclass
class Result:
    """One row of the matrix. A product's own figures are None on the other product's rows
    and on the baseline's."""

    scenario: str
    strategy: str
    product: str = ""  # VOUCHER, POOL, or "" for the baseline
    # The rows its item's stock was split into (``inventory.buckets``).
    buckets: int = 1
    requests: int = 0
    failures: int = 0
    # Units the API said were taken: orders confirmed, prizes announced as won.
    confirmed: int | None = None
    supplied: int | None = None
    stock_left: int | None = None
    # A voucher's.
    orders: int | None = None
    oversold: int | None = None
    duplicates: int | None = None
    # A pool's.
    awarded: int | None = None
    draws: int | None = None
    no_prize_draws: int | None = None
    over_awarded: int | None = None
    users_over_limit: int | None = None
    draws_over_limit: int | None = None
    # Both products'.
    lost_confirmations: int | None = None
    # Answers the records contradict (``loadtests.history``), in all and by rule; None unchecked.
    history_violations: int | None = None
    history_rules: dict[str, int] | None = None
    # Units taken per second while it sold (``sales_per_second``).
    sales_per_second: float | None = None
    # Units left at the end while buyers were told nothing was left (``stranded_units``):
    # None where not counted (the baseline, a lifecycle scenario, stock not conserved).
    stranded: int | None = None
    # A deferred strategy's (None on the others' rows): answers with 202, reservations
    # waiting when the crowd stopped, seconds from then until none waited (None when the
    # wait ran out), those still waiting then, and its Redis state against the database:
    # whether there was one, and how many rows' stock, users' takes and take numbers
    # differed.
    accepted: int | None = None
    pending_at_end: int | None = None
    drain_s: float | None = None
    unpersisted: int | None = None
    redis_state: bool | None = None
    redis_drift: dict[str, int] | None = None
    # A lifecycle scenario's (None on the others' rows), read once every hold has drained:
    # records held still, settled (paid, claimed), released (their unit back in stock), takes
    # beyond the supply (units sold again after a return), units returned more than once,
    # records both settled and released, 200s to a pay or claim whose record is not
    # settled; a voucher's provider charges, those refunded, and payments unresolved or not
    # adding up (``payments.selectors.payments_audit``); units back in stock while buyers
    # were told there was nothing left; and seconds from the crowd's end until drained
    # (None when the wait ran out).
    held_left: int | None = None
    settled: int | None = None
    released: int | None = None
    resold: int | None = None
    returned_twice: int | None = None
    settled_and_released: int | None = None
    unsettled_200s: int | None = None
    charges: int | None = None
    refunds: int | None = None
    payments_off: int | None = None
    returns_unsold: int | None = None
    holds_drain_s: float | None = None
    # A run through a waiting room's (None on the others' rows, ``loadtests.admissions``):
    # buyers admitted, buyers told it was sold out instead, the share of ordered pairs
    # admitted out of order (inversions), and the longest wait from a join to its admission.
    admitted: int | None = None
    told_sold_out: int | None = None
    inversions_percent: float | None = None
    longest_wait_s: float | None = None
    # A hoarding run's (None on the others' rows, ``locustfiles/hoarding.py``): the honest
    # buyer's asks, how many heard ``sold_out``, whether one bought; and whether the item
    # capped abandoned holds or cooled them down (docs/design.md, "Abandoned holds").
    honest_asks: int | None = None
    honest_sold_out: int | None = None
    honest_bought: bool | None = None
    abandon_capped: bool | None = None
    conserved: bool = True
    stock_not_negative: bool = True
    # Whether the running totals the pages show (inventory.totals) say what the audit
    # counted: under every strategy, the naive ones included, or the pages would lie.
    totals_agree: bool = True
    # Whether the server was still changing (writes landing, records pending) when the wait
    # until quiet gave up: audited as it stood then, which shows nothing to hold.
    audit_incomplete: bool = False
    rps: float = 0.0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    # None where the server's CPU time cannot be read (the race lab: a server it did not start).
    cpu_ms_per_request: float | None = 0.0
    race_window_ms: int = 0
    # Whether the crowd's tokens ran out before the run ended: Locust then idled, and
    # req/s measures the crowd rather than the server.
    crowd_ran_out: bool = False
    # Its Locust report, relative to the run's output folder ("" for none).
    locust_report: str = ""
    verdict: str = ""
    expected_to_break: bool = False
    ok: bool = False
    # (seconds since the start, value), sampled from the database while Locust ran.
    stock_series: list[tuple[float, int]] = field(default_factory=list)
    taken_series: list[tuple[float, int]] = field(default_factory=list)
    # The records that took a unit, released since or not: it grows with every write.
    took_series: list[tuple[float, int]] = field(default_factory=list)
    supply_series: list[tuple[float, int]] = field(default_factory=list)
    # (seconds, units left in each bucket by bucket number).
    bucket_series: list[tuple[float, list[int]]] = field(default_factory=list)

    @property
    def label(self) -> str:
        """Its strategy, and its buckets when split: the name of its row, lines and folder."""
        return bucketed_name(self.strategy, self.buckets)


def bucketed_name(strategy: str, buckets: int) -> str:
    """A run's name among runs of one strategy on one row and on buckets: ``db_atomic``,
    ``db_atomic-8-buckets``."""
    return strategy if buckets == 1 else f"{strategy}-{buckets}-buckets"


@dataclass(frozen=True)
class Verdict:
    verdict: str
    expected_to_break: bool
    ok: bool


def taken(result: Result) -> tuple[str, int]:
    """What the product's records took from the stock, by name: orders, or awarded prizes."""
    if result.product not in TAKEN:
        raise ValueError(f"not a product's result: {result.product!r}")
    name = TAKEN[result.product]
    return name, getattr(result, name) or 0


def counted_breaks(result: Result) -> list[tuple[str, int]]:
    """The product's own invariants that are counted: (label, how many broke it)."""
    if result.product == VOUCHER:
        return [("oversold", result.oversold or 0), ("duplicate orders", result.duplicates or 0)]
    if result.product == POOL:
        return [("over-awarded", result.over_awarded or 0), ("users over the limit", result.users_over_limit or 0)]
    raise ValueError(f"not a product's result: {result.product!r}")


def race_broken(result: Result) -> bool:
    """Whether the run broke what a race of takes breaks: a counted invariant (a unit sold
    twice, a user over the rule), stock not adding up, or stock below zero."""
    return (
        any(count > 0 for _, count in counted_breaks(result))
        or not result.conserved
        or not result.stock_not_negative
        or (result.stock_left or 0) < 0
    )


def took_any(result: Result) -> bool:
    """Whether the run took any unit: a take confirmed or accepted, or a record holding one."""
    return bool(result.confirmed or result.accepted or taken(result)[1])


def lifecycle(result: Result) -> bool:
    """Whether the row is a lifecycle scenario's, judged on its holds too."""
    return result.returned_twice is not None


# A settle and a release, by product: what the labels call them.
SETTLE = {VOUCHER: "paid", POOL: "claimed"}
RELEASE = {VOUCHER: "released", POOL: "forfeited"}


def lifecycle_races(result: Result) -> list[tuple[str, int]]:
    """The lifecycle's invariants that a race breaks: (label, how many broke it)."""
    settled, released = SETTLE.get(result.product, "settled"), RELEASE.get(result.product, "released")
    return [
        ("units returned twice", result.returned_twice or 0),
        (f"{settled} and {released}", result.settled_and_released or 0),
        (f"200s not {settled}", result.unsettled_200s or 0),
        ("payments unresolved or unbalanced", result.payments_off or 0),
    ]


def lifecycle_broken(result: Result) -> list[str]:
    """Labels of the lifecycle's invariants the run broke (none on another scenario's row)."""
    if not lifecycle(result):
        return []
    broken = [label for label, count in lifecycle_races(result) if count > 0]
    if result.returns_unsold:
        broken.append("returns left unsold")
    if result.held_left or result.holds_drain_s is None:
        broken.append("holds not drained")
    return broken


def broken_invariants(result: Result, *, audit_ok: bool = True) -> list[str]:
    """Labels of every invariant the run broke; ``audit_ok`` is the audit's own summary,
    so that an invariant it checks and these rules do not still fails the run."""
    name, _ = taken(result)
    broken = [label for label, count in counted_breaks(result) if count > 0]
    if not result.conserved:
        broken.append(f"stock + {name} != supplied" + (" (per prize)" if result.product == POOL else ""))
    if result.lost_confirmations:
        broken.append("confirmations lost")
    if not result.stock_not_negative or (result.stock_left or 0) < 0:
        broken.append("stock below zero")
    # What buckets promise: sold out only once every bucket is empty. A run on one row
    # reports its count and is judged as before (a fault's run may leave a unit so).
    if result.stranded and result.buckets > 1:
        broken.append("units stranded while sold out")
    if result.unpersisted:
        broken.append("reservations not persisted")
    if result.redis_state is False:
        broken.append("Redis state missing")
    broken += [REDIS_DRIFT[name] for name, count in (result.redis_drift or {}).items() if count]
    broken += lifecycle_broken(result)
    if result.history_violations:
        rules = ", ".join(f"{n} {rule}" for rule, n in (result.history_rules or {}).items() if n)
        broken.append(f"{HISTORY}: {rules or result.history_violations}")
    if result.abandon_capped and result.honest_bought is False:
        broken.append("hoarded: the honest buyer got no unit")
    if not audit_ok and not broken:
        broken.append("audit failed")
    return broken


def expected_to_break(breaks: str | None, server_processes: int) -> bool:
    """Whether a strategy that ``breaks`` this way must break on a server of that many processes."""
    if breaks is None:
        return False
    if breaks == BREAKS_ALWAYS:
        return True
    if breaks == BREAKS_ACROSS_PROCESSES:
        return server_processes > 1
    # A new kind of breaking needs a rule here, not a silent "safe".
    raise ValueError(f"unknown way to break: {breaks!r}")


def judge(result: Result, *, breaks: str | None, server_processes: int, audit_ok: bool = True) -> Verdict:
    """The verdict of one run of a strategy that ``breaks`` this way (``StockStrategy.breaks``).

    A strategy expected to break passes when it broke something (the demonstration
    reproduced; in a lifecycle scenario, one of the lifecycle's races) and fails otherwise
    ("FAILED TO REPRODUCE"); any other strategy passes only when it broke nothing and
    every answer was a documented one.
    """
    broken = broken_invariants(result, audit_ok=audit_ok)
    if not result.requests:  # nothing answered: no demonstration, and nothing shown to hold
        return Verdict(f"{NO_REQUESTS}: nothing was measured", expected_to_break(breaks, server_processes), ok=False)
    if not result.totals_agree:
        # Not a race the demonstration shows: the pages' figures are wrong whatever the strategy.
        return Verdict(
            "BROKEN: the running totals disagree with the records",
            expected_to_break=expected_to_break(breaks, server_processes),
            ok=False,
        )
    if (
        result.honest_bought is not None
        and not result.abandon_capped
        and not expected_to_break(breaks, server_processes)
    ):
        return _hoarding_uncapped(result, broken)
    if expected_to_break(breaks, server_processes):
        raced = [label for label, count in lifecycle_races(result) if count > 0]
        if lifecycle(result) and not raced and result.honest_bought is None:  # hoarding shows no race
            besides = f" (broke only: {', '.join(broken)})" if broken else ""
            return Verdict(f"{FAILED_TO_REPRODUCE} the lifecycle's race{besides}", expected_to_break=True, ok=False)
        # The demonstration is the race's own break: a unit taken twice or lost. A contradicted
        # answer, a unit stranded in a bucket or a confirmation lost alone is not it.
        if raced or race_broken(result):
            return Verdict(f"broke as expected: {', '.join(broken)}", expected_to_break=True, ok=True)
        besides = f" (broke only: {', '.join(broken)})" if broken else ""
        return Verdict(f"{FAILED_TO_REPRODUCE}{besides}", expected_to_break=True, ok=False)
    if broken:
        return Verdict(f"BROKEN: {', '.join(broken)}", expected_to_break=False, ok=False)
    if result.failures:
        return Verdict(f"UNEXPECTED ANSWERS ({result.failures})", expected_to_break=False, ok=False)
    if result.audit_incomplete:
        return Verdict(
            f"{NOT_PROVEN}: audit incomplete, still changing when audited", expected_to_break=False, ok=False
        )
    if not took_any(result):
        # Every take refused (a guard answering busy to everyone, a sale not open): nothing
        # raced, so nothing was shown to hold.
        return Verdict(f"{NOT_PROVEN}: nothing was taken", expected_to_break=False, ok=False)
    return Verdict("holds", expected_to_break=False, ok=True)


# The honest buyer's sold_out answers that show a hoarding: a unit is on sale between a
# hoarder's cancel and another's purchase, milliseconds, so one ask in many may land there.
HOARDED_ASKS = 4


def _hoarding_uncapped(result: Result, broken: list[str]) -> Verdict:
    """A hoarding run with no cap on abandoned holds and no cooldown: it demonstrates that
    hoarders keep the stock, so it passes when the honest buyer heard ``sold_out`` ask after
    ask (``HOARDED_ASKS`` at least), and every invariant held."""
    if broken:
        return Verdict(f"BROKEN: {', '.join(broken)}", expected_to_break=True, ok=False)
    asked = f"{result.honest_sold_out} of {result.honest_asks} asks"
    if (result.honest_sold_out or 0) < HOARDED_ASKS:
        return Verdict(f"FAILED TO REPRODUCE the hoarding: sold_out {asked}", expected_to_break=True, ok=False)
    return Verdict(f"hoarded as expected, no cap: the honest buyer heard sold_out {asked}", True, ok=True)
