"""A lifecycle scenario in the race lab (``loadtests.scenarios.LIFECYCLE``): the settings
its run wants that this site's worker and beat do not have, in words, and the lifecycle's
figures of a lane as its pages show them.

The lab drives the site it runs in, as configured: it cannot give the worker and beat the
settings ``make loadtest`` starts them with (``loadtests.scenarios.SERVER_SETTINGS``).
The task that carries out a run is served by that same worker, so its settings are the
ones the run met; what differs is said on the run, so that a verdict never claims a race
the site did not stage.
"""

from __future__ import annotations

from django.conf import settings

from loadtests.scenarios import SERVER_SETTINGS, SURGES, Scenario
from loadtests.verdict import RELEASE, SETTLE, VOUCHER

# What each setting of a lifecycle run changes, when the site has another value.
WITHOUT = {
    "HOLDS_SWEEP_SECONDS": "a hold whose expiry task was lost waits longer for the sweep, and the drain with it",
    "PAYMENT_PROVIDER_JITTER_MS": "callbacks are not late: pays race the deadline, not their own callbacks",
    "PAYMENT_PROVIDER_DUPLICATE_RATE": "no callback comes twice",
    "PAYMENT_PROVIDER_LOSS_RATE": "no callback is lost and sent again",
    "PAYMENT_PROVIDER_RESEND_SECONDS": "a refused callback is sent again later, and the drain waits for it",
}
PAYMENT_SETTINGS = [name for name in SERVER_SETTINGS if name.startswith("PAYMENT_")]


def settings_caveat(scenario: Scenario) -> str:
    """What this site's settings leave out of a lifecycle run of ``scenario``, in words; ""
    when it has them all, or the scenario is not the lifecycle's."""
    if not scenario.lifecycle:
        return ""
    names = [name for name in SERVER_SETTINGS if scenario.product == VOUCHER or name not in PAYMENT_SETTINGS]
    differ = [name for name in names if float(getattr(settings, name)) != float(SERVER_SETTINGS[name])]
    if not differ:
        return ""
    have = ", ".join(f"{name}={getattr(settings, name)}" for name in differ)
    wanted = ", ".join(f"{SERVER_SETTINGS[name]}" for name in differ)
    effects = "; ".join(WITHOUT[name] for name in differ)
    return f"This site runs with {have} (a lifecycle run wants {wanted}): {effects}."


def lifecycle_cells(product: str, figures: dict) -> list[tuple[str, object, bool]]:
    """(label, value, unsafe) of a lane's lifecycle figures, in the report's order
    (``loadtests.columns.LIFECYCLE_COLUMNS``); [] for a lane without them. Unsafe: a race
    broke (returned twice, settled and released, a 200 unsettled, payments off), a unit
    came back unsold, a hold was left or the drain never ended."""
    if figures.get("returned_twice") is None:
        return []
    settled, released = SETTLE.get(product, "settled"), RELEASE.get(product, "released")
    drain = figures.get("holds_drain_s")
    cells = [
        (settled, figures.get("settled"), False),
        (released, figures.get("released"), False),
        ("resold", figures.get("resold"), False),
        ("returned twice", figures.get("returned_twice"), bool(figures.get("returned_twice"))),
        (f"{settled}+{released}", figures.get("settled_and_released"), bool(figures.get("settled_and_released"))),
        ("200s unsettled", figures.get("unsettled_200s"), bool(figures.get("unsettled_200s"))),
    ]
    if product == VOUCHER:
        cells += [
            ("charges", figures.get("charges"), False),
            ("refunds", figures.get("refunds"), False),
            ("payments off", figures.get("payments_off"), bool(figures.get("payments_off"))),
        ]
    cells += [
        ("returns unsold", figures.get("returns_unsold"), bool(figures.get("returns_unsold"))),
        ("held left", figures.get("held_left"), bool(figures.get("held_left"))),
        ("drained in", "never" if drain is None else f"{drain:.1f} s", drain is None),
    ]
    return cells


def taken_text(product: str, taken: int, supplied: int, figures: dict, *, lifecycle: bool) -> str:
    """A lane's take against its supply. In a crowd run "105 of 100" is an oversell; in a
    lifecycle run a unit released and taken again counts each time, so the figure set against
    the supply leaves those out (beyond the supply only when units were oversold), and the
    resales and all sales follow in words that say so."""
    if not lifecycle:
        return f"{taken} of {supplied}"
    resold = figures.get("resold") or 0
    verb, noun, after, sales = (
        ("sold", "units", "a release", "sales") if product == VOUCHER else ("awarded", "prizes", "a forfeit", "awards")
    )
    text = f"{taken - resold} of {supplied} {noun} {verb}"
    if resold:
        text += f", {resold} of them again after {after} ({taken} {sales})"
    return text


def surge_cells(scenario: str, figures: dict) -> list[tuple[str, object, bool]]:
    """(label, value, bad) of a surge lane's figures once audited, side by side with and
    without the waiting room (``loadtests.columns.QUEUE_COLUMNS``): the take's p50 and p99,
    its errors and timeouts, and through the room those admitted, told sold out instead of
    waiting, the inversions (bad from 1%) and the longest wait; [] for another scenario's lane."""
    if scenario not in SURGES or not figures:
        return []
    failures = figures.get("failures") or 0
    cells = [
        ("take p50", f"{figures.get('p50_ms') or 0:,.0f} ms", False),
        ("take p99", f"{figures.get('p99_ms') or 0:,.0f} ms", False),
        ("errors and timeouts", failures, bool(failures)),
    ]
    if figures.get("admitted") is None:
        return cells
    inversions = figures.get("inversions_percent") or 0.0
    return cells + [
        ("admitted", figures.get("admitted"), False),
        ("told sold out", figures.get("told_sold_out"), False),
        ("inversions", f"{inversions:.2f}%", inversions >= 1.0),
        ("longest wait", f"{figures.get('longest_wait_s') or 0:.1f} s", False),
    ]
