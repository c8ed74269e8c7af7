"""The odds that draws really give: each prize its stock LEFT (its rows' ``quantity``) over
the pool's stock left plus the weight of no prize (docs/design.md, "Exact odds"), checked
statistically and exactly.

1. Drawn: from a pool whose stock left is far from its supply (``initial_quantity``), each
   unit won put back after its draw so that the odds stay fixed, seeded draws under each
   database strategy (the rows each one reads, then ``weighted_choice``) and under
   ``redis_lua`` (the choice of its Lua script, in Redis) pass a chi-square goodness-of-fit
   test of the odds of the stock left at a significance level of 0.001: the test fails only
   if the counts would occur less than once in a thousand samples of a correct draw. The
   same counts reject the odds of the supply, the law of a draw weighted by
   ``initial_quantity``: the test can fail.
2. Exact, ticket by ticket: an urn of 1 rare and 19 common units, drawn with a stand-in
   for the rng that says how many tickets each draw drew from and answers a chosen one:
   each draw draws from the units left (20, 19, ..., 1), the ticket lands on the row whose
   units cover it, and the 21st draw answers ``pool_empty``.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from fractions import Fraction

import pytest
from django.db.models import F
from scipy.stats import chisquare

from inventory.models import Stock
from inventory.redis_lua.client import reservations_client
from lottery.errors import PoolEmpty
from lottery.selectors import pool_audit, pool_get
from lottery.services import pool_draw, pool_update

pytestmark = pytest.mark.django_db

SIGNIFICANCE = 0.001
# (supply, left) of each prize: A has given 80 of its 90 units, B none of its 30, C 10 of its 60.
PRIZES = {"A": (90, 10), "B": (30, 30), "C": (60, 50)}
NO_PRIZE = 10
OUTCOMES = [*PRIZES, None]
# The law of the contract, 10 / 30 / 50 / 10 in 100, and the law of the supply, 90 / 30 / 60 / 10
# in 190: A's odds almost five times too high, no prize's half.
LEFT = {name: Fraction(left, 100) for name, (_, left) in PRIZES.items()} | {None: Fraction(NO_PRIZE, 100)}
SUPPLY = {name: Fraction(supply, 190) for name, (supply, _) in PRIZES.items()} | {None: Fraction(NO_PRIZE, 190)}
DRAWS = 400  # per database strategy: 5 to 15 ms a draw
DRAWS_LUA = 2_000


def pool_drawn_down(make_pool, *, strategy: str, draws: int):
    """A pool of ``PRIZES``' supply whose rows hold the stock left (its units taken counted)."""
    supplies = [(name, supply) for name, (supply, _) in PRIZES.items()]
    pool = make_pool(prizes=supplies, no_prize_weight=NO_PRIZE, draws_per_user=draws, strategy=strategy)
    for row in Stock.objects.filter(group_id=pool.group_id).select_related("head__prize"):
        supply, left = PRIZES[row.head.prize.name]
        Stock.objects.filter(pk=row.pk).update(quantity=left, taken=supply - left)
    return pool_get(pool_id=pool.pk)


def fits_the_stock_left(counts: Counter, draws: int, label: str) -> None:
    """The counts pass the chi-square test of the odds of the stock left and fail that of the
    odds of the supply."""
    observed = [counts[name] for name in OUTCOMES]
    left = chisquare(observed, [float(LEFT[name]) * draws for name in OUTCOMES])
    supply = chisquare(observed, [float(SUPPLY[name]) * draws for name in OUTCOMES])
    print(f"\n{label}: {draws} draws, A / B / C / none {observed}: stock left {left}; supply {supply}")
    assert left.pvalue > SIGNIFICANCE, (observed, left)
    # The test's power: the same counts reject the law weighted by initial_quantity.
    assert supply.pvalue < SIGNIFICANCE, (observed, supply)


@pytest.mark.parametrize("strategy", ["db_pessimistic", "db_optimistic", "db_atomic", "redis_lock"])
def test_draws_weigh_each_prize_by_its_stock_left_not_its_supply(strategy, make_pool, make_user):
    pool = pool_drawn_down(make_pool, strategy=strategy, draws=DRAWS)
    user, rng, started = make_user(), random.Random(20261123), time.monotonic()
    counts = Counter()
    for _ in range(DRAWS):
        drawn = pool_draw(user=user, pool=pool, rng=rng)
        counts[drawn.prize.name if drawn.prize else None] += 1
        if drawn.stock_id is not None:  # the unit back in its row: the odds stay as they were
            Stock.objects.filter(pk=drawn.stock_id).update(quantity=F("quantity") + 1, taken=F("taken") - 1)
    fits_the_stock_left(counts, DRAWS, f"{strategy} in {time.monotonic() - started:.1f} s")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reservations_redis")
def test_the_lua_script_weighs_each_prize_by_its_stock_left_not_its_supply(make_pool, make_user):
    pool = pool_drawn_down(make_pool, strategy="db_atomic", draws=DRAWS_LUA)
    pool_update(pool=pool, strategy="redis_lua")  # its state loaded from the rows: the stock left
    reservations = reservations_client()
    rows = dict(Stock.objects.filter(group_id=pool.group_id).values_list("id", "quantity"))
    assert reservations.stock(group_id=pool.group_id) == rows
    pool = pool_get(pool_id=pool.pk)
    user, rng, started = make_user(), random.Random(20261123), time.monotonic()
    counts = Counter()
    for _ in range(DRAWS_LUA):
        drawn = pool_draw(user=user, pool=pool, rng=rng)  # reserved by RESERVE: the choice in Redis
        counts[drawn.prize.name if drawn.prize else None] += 1
        if drawn.stock_id is not None:  # the unit back in the state: the odds stay as they were
            reservations.add_units(group_id=pool.group_id, stock_id=drawn.stock_id, units=1)
    assert reservations.stock(group_id=pool.group_id) == rows
    fits_the_stock_left(counts, DRAWS_LUA, f"redis_lua in {time.monotonic() - started:.1f} s")


class Tickets:
    """A stand-in for the rng of ``weighted_choice``: records how many tickets each draw drew
    from, and answers the last of them, or the first on the draw numbered ``first``."""

    def __init__(self, first: int) -> None:
        self.first, self.ranges = first, []

    def randrange(self, n: int) -> int:
        self.ranges.append(n)
        return 0 if len(self.ranges) == self.first else n - 1


@pytest.mark.parametrize("rare_at", [1, 10, 20])
@pytest.mark.parametrize("strategy", ["db_pessimistic", "db_optimistic", "db_atomic", "redis_lock"])
def test_odds_follow_the_stock_as_it_falls(rare_at, strategy, make_pool, make_user):
    """Rare's row comes first: the first ticket lands on it while it has its unit, the last on
    Common while Common has one. A draw weighted by the supply draws from 20 tickets every
    time; one that weighs the rows with stock alike, from 2."""
    pool = make_pool(prizes=(("Rare", 1), ("Common", 19)), draws_per_user=100, strategy=strategy)
    user, tickets = make_user(), Tickets(first=rare_at)
    won = [pool_draw(user=user, pool=pool_get(pool_id=pool.pk), rng=tickets).prize.name for _ in range(20)]
    with pytest.raises(PoolEmpty):
        pool_draw(user=user, pool=pool_get(pool_id=pool.pk), rng=tickets)
    assert tickets.ranges == list(range(20, 0, -1))  # each draw's tickets: the units left
    assert won == ["Common"] * (rare_at - 1) + ["Rare"] + ["Common"] * (20 - rare_at)
    audit = pool_audit(pool_id=pool.pk)
    assert (audit.ok, audit.awarded, audit.stock, audit.draws) == (True, 20, 0, 20)
