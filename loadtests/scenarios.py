"""The scenarios, in one registry: adding one is a locustfile and one line here.

Each names its locustfile (``loadtests/locustfiles/``, whose docstring tells the
story), the product it runs against (``loadtests.products``) and what it proves.

The lifecycle's scenarios (``LIFECYCLE``) run on items with a hold window: what becomes
of a unit after its take (paid, claimed, cancelled, expired, forfeited) is what they
prove. They need a Celery worker and beat beside the server, releasing holds at their
deadline and delivering the payment provider's callbacks, with settings of their own
(``loadtests.lifecycle``): the runner starts those; the race lab, which drives the site
it runs in as it is configured, offers them after ``SCENARIOS`` and says what the site's
settings leave out (``lab.lifecycle``), ``make run`` giving its worker these settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .verdict import POOL, VOUCHER

LOCUSTFILES = Path(__file__).resolve().parent / "locustfiles"
# The hold window of a lifecycle scenario's items (``--hold-seconds``): short, so that a
# run of a few seconds sees holds taken, released and taken again, and drains soon.
HOLD_SECONDS = 2
# The admissions a second of a waiting room's scenario (``--admission-rate``): well under what
# the take serves on two cores, so that the take is never the crowd's queue.
ADMISSION_RATE = 100.0

# What the server's processes and the Celery worker and beat run with once a lifecycle
# scenario is in the run (``loadtests.lifecycle``), and what ``make run`` gives its own
# unless told otherwise. The beat sweeps each second: a hold's second releaser besides its
# task at the deadline, and a short drain. The simulated provider confirms a charge at once
# (``--payment-delay-ms`` 0: the pay answers 200) and posts its callback up to a second
# later, twice for half the charges, and never for a fifth of them, which the beat sends
# again every second until acknowledged.
SERVER_SETTINGS = {
    "HOLDS_SWEEP_SECONDS": "1",
    "PAYMENT_PROVIDER_JITTER_MS": "1000",
    "PAYMENT_PROVIDER_DUPLICATE_RATE": "0.5",
    "PAYMENT_PROVIDER_LOSS_RATE": "0.2",
    "PAYMENT_PROVIDER_RESEND_SECONDS": "1",
}


@dataclass(frozen=True)
class Scenario:
    name: str
    locustfile: str
    product: str
    proves: str
    # Whether its Locust users serve the crowd of tokens one after another (and can run
    # out of it), rather than sharing a few tokens (``--hammer-buyers``).
    serves_the_crowd: bool = True
    # Whether a buyer tries more than it may (buys twice, draws past the limit): when not,
    # the product's second invariant (duplicate orders, users over the limit) is not tried.
    repeats: bool = False
    # Whether its items hold each unit taken for a payment or a claim (``--hold-seconds``),
    # its run drains those holds before the audit, and it is judged on the lifecycle too.
    lifecycle: bool = False
    # Open tabs polling the item's pages beside its crowd (``watched.py``): Locust users
    # added to the run's, whose answers stay out of the take's figures.
    watchers: int = 0
    # Whether its item has a waiting room (``admission`` ``queue``, at ``--admission-rate`` a
    # second) that its buyers pass through (``loadtests.queue_calls``), and its run reports
    # how fairly it admitted them (``loadtests.admissions``).
    queue: bool = False
    # Whether its run is over once its stock is (``--stop-when-sold-out``): not a restock's,
    # whose stock comes back, nor the lifecycle's, whose units do.
    ends_sold_out: bool = True
    # Whether its buyers abandon holds and buy again by design (cancel-storm's rounds): its
    # items then cap no abandoned holds and keep no cooldown (docs/design.md, "Abandoned
    # holds"), which would answer its second round ``cooling_down``.
    abandons_freely: bool = False
    # Whether one honest buyer among hoarders is judged (``hoarding``): whether they bought
    # (``loadtests.verdict``, ``honest_bought``).
    honest_buyer: bool = False

    @property
    def path(self) -> Path:
        return LOCUSTFILES / self.locustfile


SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario("crowd", "crowd.py", VOUCHER, "a crowd buying once each: no more sold than the stock"),
        Scenario(
            "hammer",
            "hammer.py",
            VOUCHER,
            "a few buyers firing many purchases at once: one order per buyer",
            serves_the_crowd=False,
            repeats=True,
        ),
        Scenario(
            "restock",
            "restock.py",
            VOUCHER,
            "restocks under purchases: every unit supplied is sold or left",
            ends_sold_out=False,
        ),
        Scenario(
            "watched",
            "watched.py",
            VOUCHER,
            "a crowd buying once each while 200 open tabs poll the sale: the pages cost the take nothing",
            watchers=200,
        ),
        Scenario(
            "surge",
            "surge.py",
            VOUCHER,
            "a crowd far beyond the take's capacity at the take at once: sold once, but latencies grow",
        ),
        Scenario(
            "surge-queue",
            "surge_queue.py",
            VOUCHER,
            "the same crowd through a waiting room: sold once, the take unhurried, admitted in order",
            queue=True,
        ),
        Scenario(
            "draw-crowd",
            "draw_crowd.py",
            POOL,
            "a crowd drawing up to the limit: no prize beyond its supply",
            repeats=True,  # each draws until told draw_limit
        ),
        Scenario(
            "draw-hammer",
            "draw_hammer.py",
            POOL,
            "a few users firing many draws at once: nobody over the draw limit",
            serves_the_crowd=False,
            repeats=True,
        ),
    )
}
LIFECYCLE: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario(
            "abandon",
            "abandon.py",
            VOUCHER,
            "buyers who never pay: their units come back once and are sold again",
            lifecycle=True,
        ),
        Scenario(
            "pay-race",
            "pay_race.py",
            VOUCHER,
            "pays fired around pay_by, callbacks late and twice: each unit paid or released, never both",
            lifecycle=True,
        ),
        # A draw has no cancel (a winner claims or lets the prize go), so this one is the
        # flash sale's only; the pools' race at the deadline is claim-race's.
        Scenario(
            "cancel-storm",
            "cancel_storm.py",
            VOUCHER,
            "cancels fired many at once, some with a pay, buyers buying again: each unit back once",
            lifecycle=True,
            repeats=True,  # a buyer buys again after each cancel
            abandons_freely=True,
        ),
        Scenario(
            "hoarding",
            "hoarding.py",
            VOUCHER,
            "accounts that buy, cancel and buy again: one honest buyer still gets a unit (the cap and cooldown)",
            serves_the_crowd=False,
            repeats=True,  # a hoarder buys again after each cancel
            lifecycle=True,
            honest_buyer=True,
        ),
        Scenario(
            "draw-abandon",
            "draw_abandon.py",
            POOL,
            "winners who never claim: their prizes come back once and are won again",
            repeats=True,
            lifecycle=True,
        ),
        Scenario(
            "claim-race",
            "claim_race.py",
            POOL,
            "claims fired around claim_by: each prize claimed or forfeited, never both",
            repeats=True,
            lifecycle=True,
        ),
    )
}
# The surge's two runs, whose lanes in the race lab show the take's latencies, errors and
# timeouts side by side, and the waiting room's fairness.
SURGES = ("surge", "surge-queue")
# Every scenario the runner knows, the race lab's first.
ALL: dict[str, Scenario] = SCENARIOS | LIFECYCLE
DEFAULT = "crowd"


def scenarios_named(names: str, among: dict[str, Scenario] = ALL) -> list[Scenario]:
    """``"all"``, ``"lifecycle"`` (its scenarios) or comma-separated names of ``among``, in
    the order given; raises ``KeyError`` naming the unknown ones."""
    if names == "all":
        return list(among.values())
    if names == "lifecycle":
        names = ",".join(LIFECYCLE)
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in among]
    if unknown:
        raise KeyError(", ".join(unknown))
    return [among[name] for name in wanted]


def scenarios_help() -> str:
    """One line per scenario, for ``--help``."""
    return "\n".join(f"  {s.name:<12} ({s.product}) {s.proves}" for s in ALL.values())
