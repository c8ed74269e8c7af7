"""The odds that draws really give, checked statistically and exactly.

1. With stock so large that it barely moves, many seeded draws through the service
   match the expected odds by a chi-square goodness-of-fit test (scipy), at a
   significance level of 0.001: the test fails only if the observed counts would
   occur less than once in a thousand samples of a correct draw.
2. The odds follow the stock as it falls, ticket by ticket: an urn of 1 rare and 19 common
   units, drawn with a stand-in for the rng that says how many tickets each draw drew from
   and answers a chosen one: each draw draws from the units left (20, 19, ..., 1), the
   ticket lands on the row whose units cover it, and the 21st draw answers ``pool_empty``.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from scipy.stats import chisquare

from lottery.errors import PoolEmpty
from lottery.selectors import pool_audit, pool_get
from lottery.services import pool_draw

pytestmark = pytest.mark.django_db

SIGNIFICANCE = 0.001
DRAWS = 3000
# Weights 1 : 2 : 3 for the prizes and 4 for "no prize", in millions of units.
STOCK = (("A", 1_000_000), ("B", 2_000_000), ("C", 3_000_000))
NO_PRIZE_WEIGHT = 4_000_000


@pytest.mark.parametrize("seed", [20261123, 7])
def test_many_draws_match_the_expected_odds(seed, make_pool, make_user):
    pool = make_pool(prizes=STOCK, no_prize_weight=NO_PRIZE_WEIGHT, draws_per_user=DRAWS)
    user, rng = make_user(), random.Random(seed)
    counts = Counter()
    for _ in range(DRAWS):
        draw = pool_draw(user=user, pool=pool, rng=rng)  # the prefetched stock is only the snapshot
        counts[draw.prize.name if draw.prize else "no prize"] += 1
    total = sum(stock for _, stock in STOCK) + NO_PRIZE_WEIGHT
    categories = [name for name, _ in STOCK] + ["no prize"]
    weights = [stock for _, stock in STOCK] + [NO_PRIZE_WEIGHT]
    expected = [DRAWS * weight / total for weight in weights]
    observed = [counts[name] for name in categories]
    statistic, p_value = chisquare(observed, expected)
    print(f"\nseed {seed}: observed {dict(zip(categories, observed, strict=True))}, "
          f"expected {[round(e) for e in expected]}, chi-square {statistic:.3f}, p {p_value:.3f}")  # fmt: skip
    assert p_value > SIGNIFICANCE, (observed, expected, statistic, p_value)
    assert pool_audit(pool_id=pool.pk).ok


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
