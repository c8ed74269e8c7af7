"""The odds that draws really give, checked statistically and exactly.

1. With stock so large that it barely moves, many seeded draws through the service
   match the expected odds by a chi-square goodness-of-fit test (scipy), at a
   significance level of 0.001: the test fails only if the observed counts would
   occur less than once in a thousand samples of a correct draw.
2. The odds follow the stock as it falls: an urn of 1 rare and 19 common units gives
   exactly 20 wins, the rare prize exactly once, then ``pool_empty``.
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


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("strategy", ["db_pessimistic", "db_atomic", "redis_lock"])
def test_odds_follow_the_stock_as_it_falls(seed, strategy, make_pool, make_user, settings):
    pool = make_pool(prizes=(("Rare", 1), ("Common", 19)), draws_per_user=100, strategy=strategy)
    user, rng = make_user(), random.Random(seed)
    won = []
    for _ in range(20):
        won.append(pool_draw(user=user, pool=pool_get(pool_id=pool.pk), rng=rng).prize.name)
    with pytest.raises(PoolEmpty):
        pool_draw(user=user, pool=pool_get(pool_id=pool.pk), rng=rng)
    assert Counter(won) == {"Rare": 1, "Common": 19}
    audit = pool_audit(pool_id=pool.pk)
    assert (audit.ok, audit.awarded, audit.stock, audit.draws) == (True, 20, 0, 20)
