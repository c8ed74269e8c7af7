"""The lifecycle scenarios' side of a run (``loadtests.scenarios.LIFECYCLE``): the settings
their server and worker run with, the hold window of their items, the wait until every
hold and payment has drained, and the figures they are judged on (``loadtests.verdict``).

Imported once Django is set up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.db.models import Case, IntegerField, Max, QuerySet, Sum, Value, When
from django.utils import timezone

from inventory.records import Record
from payments.models import Payment, ProviderCharge
from payments.selectors import payments_audit

from .common import last_out_of_stock
from .products import Audit, Product, Target
from .scenarios import HOLD_SECONDS, SERVER_SETTINGS
from .verdict import VOUCHER

# A drain is over once nothing changed for this long: the last callbacks' copies are
# posted together, and a copy still on its way lands within it.
QUIET_SECONDS = 1.0
# A unit released this long before the crowd was last told "nothing left" may still have
# been on its way back: the out-of-stock moment on file trails the last by up to 0.25 s,
# and a refusal answers what its strategy read a moment before.
RESALE_MARGIN_SECONDS = 1.0


def server_settings(payment_delay_ms: int = 0) -> dict[str, str]:
    """``SERVER_SETTINGS`` with the provider's delay: above 0 a pay answers 202 and its
    callback decides."""
    return SERVER_SETTINGS | {"PAYMENT_PROVIDER_DELAY_MS": str(payment_delay_ms)}


def describe_settings(payment_delay_ms: int = 0) -> str:
    """The provider's and the sweep's settings in words, for the runner's progress."""
    settings = server_settings(payment_delay_ms)
    confirmed = "at once" if payment_delay_ms <= 0 else f"after {payment_delay_ms} ms"
    return (
        f"the beat sweeping every {settings['HOLDS_SWEEP_SECONDS']} s; the provider confirming {confirmed}, its "
        f"callbacks up to {settings['PAYMENT_PROVIDER_JITTER_MS']} ms late, "
        f"{float(settings['PAYMENT_PROVIDER_DUPLICATE_RATE']):.0%} twice, "
        f"{float(settings['PAYMENT_PROVIDER_LOSS_RATE']):.0%} lost and sent again after "
        f"{settings['PAYMENT_PROVIDER_RESEND_SECONDS']} s"
    )


def hold_seconds(args, lifecycle: bool) -> int:
    """The hold window of a run's items: ``--hold-seconds`` for a lifecycle scenario (the race
    lab's ``HOLD_SECONDS``), none otherwise; the fault runner's runs hold
    their takes whatever the scenario, as its ``--hold-seconds`` or the fault says
    (``holds_every_scenario``)."""
    if getattr(args, "holds_every_scenario", False):
        return args.hold_seconds
    return getattr(args, "hold_seconds", HOLD_SECONDS) if lifecycle else 0


def outstanding(product: Product, target: Target) -> tuple:
    """(records held, payments or callbacks not resolved, acknowledgements so far, and what
    ``Product.wait_until_quiet`` watches): the first two are 0 once a lifecycle run has
    drained, the rest still change while late requests and duplicate callbacks land."""
    held = product.records(target).filter(status=Record.Status.HELD).count()
    activity = product.activity(target)
    if product.name != VOUCHER:
        return held, 0, 0, activity
    payments = Payment.objects.filter(order__voucher_id=target.pk)
    charges = ProviderCharge.objects.filter(reference__in=payments.values("reference"))
    totals = charges.aggregate(
        acknowledged=Sum("acknowledgements"), last_sent=Max("sent_at"), waiting=Sum(_unacknowledged())
    )
    # A charge's callbacks leave at ``sent_at``: one due later is still to come.
    recent = totals["last_sent"] is not None and totals["last_sent"] > timezone.now() - timedelta(seconds=QUIET_SECONDS)
    unresolved = payments.filter(status=Payment.Status.REQUESTED).count() + (totals["waiting"] or 0) + recent
    return held, unresolved, totals["acknowledged"] or 0, activity


def _unacknowledged() -> Case:
    return Case(When(acknowledged_at__isnull=True, then=Value(1)), default=Value(0), output_field=IntegerField())


def wait_until_drained(
    product: Product, target: Target, timeout: float, say: Callable[[str], None] | None = None
) -> float | None:
    """Wait until no record of the target is held (the worker's tasks and the beat's sweep
    release them at their deadline) and, for a voucher, every payment is resolved and every
    charge's callbacks were delivered and acknowledged, with nothing changed for
    ``QUIET_SECONDS`` (the server gone quiet as ``Product.wait_until_quiet`` waits for it);
    the seconds until then, or None when ``timeout`` ran out first."""
    started = time.monotonic()
    give_up = started + timeout
    last, since = None, started
    next_report = started + 5
    while True:
        now = outstanding(product, target)
        moment = time.monotonic()
        if now != last:
            last, since = now, moment
        if now[0] == 0 and now[1] == 0 and now[3][-1] == 0 and moment - since >= QUIET_SECONDS:
            return round(since - started, 2)
        if moment >= give_up:
            return None
        if say is not None and moment >= next_report:
            say(f"  ... draining: {now[0]} held, {now[1]} payments or callbacks outstanding")
            next_report += 5
        time.sleep(0.2)


def resold(took: int, supplied: int, figures: dict, released: int) -> int:
    """Units sold again after a release: the takes beyond the supply, less those that sold
    what was never there (oversold, over-awarded: no release behind them), and no more than
    the releases."""
    oversold = figures.get("oversold") or figures.get("over_awarded") or 0
    return max(0, min(released, took - supplied - oversold))


def figures(product: Product, target: Target, audit: Audit, outcomes: list[list[str]], outcomes_dir: Path) -> dict:
    """The lifecycle's fields of ``verdict.Result`` (all but ``holds_drain_s``), from the
    drained audit, the outcome lines and the out-of-stock marks."""
    holds = audit.holds
    took = product.took(target)
    supplied, stock_left = audit.figures["supplied"], audit.figures["stock_left"]
    answered = settled_answers(outcomes)
    found = product.statuses(target, sorted(answered))
    settled = product.settle_status
    result = {
        "held_left": holds.held,
        "settled": holds.settled,
        "released": holds.released,
        "resold": resold(took.count(), supplied, audit.figures, holds.released),
        "returned_twice": holds.returned_twice,
        "settled_and_released": holds.settled_and_released,
        "unsettled_200s": sum(1 for record_id in answered if found.get(record_id) != settled),
        "returns_unsold": returns_unsold(took, stock_left, last_out_of_stock(outcomes_dir)),
    }
    if product.name == VOUCHER:
        result |= payment_figures(target)
    return result


def returns_unsold(took: QuerySet, stock_left: int, out_of_stock_at: float | None) -> int:
    """Units in stock at the end beyond those released after the crowd was last told there
    was nothing left (less ``RESALE_MARGIN_SECONDS``): each of those was back while buyers
    were refused. 0 when nobody was refused for want of stock."""
    if out_of_stock_at is None:
        return 0
    since = datetime.fromtimestamp(out_of_stock_at - RESALE_MARGIN_SECONDS, tz=UTC)
    late = took.filter(released_at__gt=since).aggregate(units=Sum("releases"))["units"] or 0
    return max(0, stock_left - late)


def payment_figures(target: Target) -> dict:
    """A voucher's charges, refunds, and payments unresolved or off balance."""
    audit = payments_audit(voucher_id=target.pk)
    # Once drained, a payment still waiting for its confirmation is off too.
    return {"charges": audit.confirmations, "refunds": audit.refunded, "payments_off": audit.off + audit.waiting}


def settled_answers(outcomes: list[list[str]]) -> set[int]:
    """The ids of the records a pay or a claim was answered 200 for (``loadtests.holds_calls``
    logs ``pay paid <id>``, ``claim claimed <id>``)."""
    return {
        int(outcome[2])
        for outcome in outcomes
        if len(outcome) == 3 and (outcome[0], outcome[1]) in (("pay", "paid"), ("claim", "claimed"))
    }
