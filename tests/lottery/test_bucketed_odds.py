"""The odds of a pool split into buckets (docs/design.md, "Buckets"): the bucket chosen by
weight, each bucket with its share of no prize, then the prize within it, give each prize
its stock left across every bucket over the pool's total, exactly.

Exactly, counted: every ticket of both choices enumerated, as fractions. Drawn: draws from
the database through the pool's strategy, the stock put back after each so that the odds
stay fixed, pass a chi-square test against the exact odds, and the same counts reject the
law a bucketed draw gets wrong most easily (every bucket alike)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from django.db.models import F
from scipy.stats import chisquare

from inventory.buckets import weighted_route
from inventory.models import Stock
from lottery.product import weighted_choice
from lottery.selectors import pool_get
from lottery.services import pool_draw

BUCKETS = 4
NO_PRIZE = 8
# Each prize's units by bucket, spread unevenly on purpose: an even spread hides a route
# that ignores the buckets' weights.
LAYOUT = {"Gold": [6, 0, 0, 0], "Silver": [0, 3, 3, 0], "Bronze": [1, 1, 1, 9]}
TOTAL = sum(map(sum, LAYOUT.values())) + NO_PRIZE  # 32
EXACT = {name: Fraction(sum(units), TOTAL) for name, units in LAYOUT.items()} | {None: Fraction(NO_PRIZE, TOTAL)}
DRAWS = 2_000


class Ticket:
    """A stand-in for the rng that answers one given ticket."""

    def __init__(self, ticket: int) -> None:
        self.ticket = ticket

    def randrange(self, n: int) -> int:
        assert 0 <= self.ticket < n
        return self.ticket


def rows() -> dict[int, tuple[int, str, int]]:
    """``{stock id: (bucket, prize, units)}`` of ``LAYOUT``, ids as a pool's rows would be."""
    layout = [(bucket, name, units) for name, shares in LAYOUT.items() for bucket, units in enumerate(shares)]
    return dict(enumerate(layout, start=1))


def odds_counted() -> dict[str | None, Fraction]:
    """Every outcome's probability, from every ticket of the route and of the choice within
    the bucket it names, as the take runs them (``StockStrategy._take_bucketed``)."""
    layout = rows()
    by_bucket = {b: sum(units for bucket, _, units in layout.values() if bucket == b) for b in range(BUCKETS)}
    routes = BUCKETS * TOTAL  # the route's tickets: every weight scaled by the buckets
    odds: dict[str | None, Fraction] = dict.fromkeys(EXACT, Fraction(0))
    for route_ticket in range(routes):
        bucket = weighted_route(
            group_id=0, buckets=BUCKETS, nothing_weight=NO_PRIZE, rng=Ticket(route_ticket), first=by_bucket
        )(None)
        # The rows of the bucket with stock, as the take offers them (none: no prize).
        remaining = {sid: units for sid, (b, _, units) in layout.items() if b == bucket and units > 0}
        choices = BUCKETS * sum(remaining.values()) + NO_PRIZE
        for choice_ticket in range(choices):
            chosen = weighted_choice(no_prize_weight=NO_PRIZE, rng=Ticket(choice_ticket), scale=BUCKETS)(remaining)
            odds[None if chosen is None else layout[chosen][1]] += Fraction(1, routes * choices)
    return odds


def test_the_route_and_the_choice_give_each_prize_its_exact_odds():
    assert odds_counted() == EXACT


def every_bucket_alike() -> dict[str | None, float]:
    """The wrong law: each bucket chosen with the same probability, whatever its stock."""
    odds: dict[str | None, float] = dict.fromkeys(EXACT, 0.0)
    for bucket in range(BUCKETS):
        units = {name: shares[bucket] for name, shares in LAYOUT.items()}
        within = sum(units.values()) + NO_PRIZE / BUCKETS
        for name, n in units.items():
            odds[name] += n / within / BUCKETS
        odds[None] += NO_PRIZE / BUCKETS / within / BUCKETS
    return odds


@pytest.mark.django_db(transaction=True)
def test_draws_from_a_bucketed_pool_pass_a_chi_square_test_of_the_exact_odds(make_pool, make_user):
    pool = make_pool(
        prizes=[(name, sum(units)) for name, units in LAYOUT.items()],
        no_prize_weight=NO_PRIZE,
        draws_per_user=DRAWS,
        buckets=BUCKETS,
        strategy="db_pessimistic",
    )
    for row in Stock.objects.filter(group_id=pool.group_id).select_related("head__prize"):
        units = LAYOUT[row.head.prize.name][row.bucket]
        Stock.objects.filter(pk=row.pk).update(quantity=units, initial_quantity=units)
    user, rng = make_user(), random.Random(1)

    counts = dict.fromkeys(EXACT, 0)
    for _ in range(DRAWS):
        drawn = pool_draw(user=user, pool=pool_get(pool_id=pool.pk), rng=rng)
        counts[None if drawn.prize is None else drawn.prize.name] += 1
        if drawn.stock_id is not None:  # the unit back in its row: the odds stay as they were
            Stock.objects.filter(pk=drawn.stock_id).update(quantity=F("quantity") + 1)

    observed = [counts[name] for name in EXACT]
    exact = chisquare(observed, [float(EXACT[name]) * DRAWS for name in EXACT])
    wrong = every_bucket_alike()
    alike = chisquare(observed, [wrong[name] * DRAWS for name in EXACT])
    print(f"\nchi-square over {DRAWS} draws, {observed}: exact odds {exact}; every bucket alike {alike}")
    assert exact.pvalue > 0.001, (counts, exact)
    # The test can fail: the same counts reject the law that ignores the buckets' weights.
    assert alike.pvalue < 0.001, (counts, alike)
