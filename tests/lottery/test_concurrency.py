"""Each strategy draws from one pool under real concurrency: 8 processes x 4 threads.

Prizes of 2, 2 and 1 units (5 in all), no "no prize" weight, a limit of 2 draws per
user, and 11 users of whom most fire 3 draws from 3 different processes at the same
moment (one more than the limit). ``RACE_WINDOW_MS`` widens the gap between the
choice and the write identically for every strategy. Each test says which pool
invariant (docs/design.md, "Invariants") must hold, or which one must break.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from inventory.records import public_of
from inventory.strategies import STRATEGIES, strategy_names
from lottery.errors import DrawLimit
from lottery.models import Draw
from lottery.selectors import pool_audit, pool_get
from lottery.services import pool_draw

from ..buyers import draw_concurrently

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redlock_urls"), pytest.mark.race]

PRIZES = (("Gold", 1), ("Silver", 2), ("Bronze", 2))
SUPPLY = 5
LIMIT = 2
RACE_MS = 30
PROCESSES = 8
THREADS = 4


@pytest.fixture
def crowd(make_user):
    """32 slots: user k draws in processes k, k+1 and k+2 (mod 8), so each repeats across processes."""
    users = [make_user().pk for _ in range(11)]
    slots = [users[n % len(users)] for n in range(PROCESSES * THREADS)]
    plan = [slots[p::PROCESSES] for p in range(PROCESSES)]
    assert max(slots.count(user) for user in users) > LIMIT
    return plan


def assert_every_confirmed_draw_is_recorded_once_with_its_prize(pool, outcome) -> None:
    recorded = {public_of(pk): prize for pk, prize in Draw.objects.filter(pool=pool).values_list("id", "prize_id")}
    assert dict(outcome.confirmed) == recorded
    assert len(outcome.confirmed) == len(recorded)
    assert not outcome.unexpected, outcome.unexpected


def summary(strategy: str, audit) -> str:
    return (
        f"\n{strategy}: supplied {audit.supplied}, awarded {audit.awarded}, over-awarded {audit.over_awarded}, "
        f"users over the limit {audit.users_over_limit} ({audit.draws_over_limit} extra draws), "
        f"conserved {audit.conserved}"
    )


@pytest.mark.parametrize("strategy", strategy_names(breaks=None, deferred=False))
def test_safe_strategies_keep_every_pool_invariant(strategy, make_pool, crowd):
    pool = make_pool(prizes=PRIZES, draws_per_user=LIMIT, strategy=strategy)
    outcome = draw_concurrently(pool_id=pool.pk, plan=crowd, race_ms=RACE_MS)
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    print(summary(strategy, audit))
    assert audit.ok, audit
    assert (audit.over_awarded, audit.users_over_limit, audit.stock + audit.awarded) == (0, 0, SUPPLY)
    assert_every_confirmed_draw_is_recorded_once_with_its_prize(pool, outcome)
    if not STRATEGIES[strategy].sheds_load:  # which may refuse draws as busy before the pool is empty
        assert audit.awarded == SUPPLY


def test_none_over_awards(make_pool, crowd):
    pool = make_pool(prizes=PRIZES, draws_per_user=LIMIT, strategy="none")
    outcome = draw_concurrently(pool_id=pool.pk, plan=crowd, race_ms=RACE_MS)
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    print(summary("none", audit))
    # More prizes awarded than supplied, and units lost from the count.
    assert audit.over_awarded > 0, audit
    assert not audit.conserved, audit
    assert_every_confirmed_draw_is_recorded_once_with_its_prize(pool, outcome)


def test_local_over_awards_across_processes(make_pool, crowd):
    pool = make_pool(prizes=PRIZES, draws_per_user=LIMIT, strategy="local")
    outcome = draw_concurrently(pool_id=pool.pk, plan=crowd, race_ms=RACE_MS)
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    print(summary("local", audit))
    # Each process's lock admits its own drawer at the same moment.
    assert audit.over_awarded > 0, audit
    assert not audit.conserved, audit
    assert_every_confirmed_draw_is_recorded_once_with_its_prize(pool, outcome)


@pytest.mark.parametrize("strategy", strategy_names(breaks="always") + strategy_names(breaks="across_processes"))
def test_naive_strategies_let_one_user_exceed_the_limit_across_processes(strategy, make_pool, make_user):
    # A limit of one: two of the eight processes inside the race window are enough to break it.
    pool = make_pool(prizes=(("Gold", 50),), draws_per_user=1, strategy=strategy)
    user = make_user().pk
    outcome = draw_concurrently(pool_id=pool.pk, plan=[[user]] * PROCESSES, race_ms=RACE_MS)
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    print(summary(f"{strategy}, one user in {PROCESSES} processes", audit))
    assert audit.users_over_limit == 1, audit
    assert audit.draws_over_limit > 0, audit
    assert_every_confirmed_draw_is_recorded_once_with_its_prize(pool, outcome)


def test_local_holds_within_one_process(make_pool, make_user):
    pool = make_pool(prizes=PRIZES, draws_per_user=LIMIT, strategy="local")
    users = [make_user().pk for _ in range(6)]
    outcome = draw_concurrently(pool_id=pool.pk, plan=[users * 3], race_ms=RACE_MS)  # 18 threads
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert (audit.over_awarded, audit.awarded, audit.stock) == (0, SUPPLY, 0), audit
    assert audit.conserved
    assert_every_confirmed_draw_is_recorded_once_with_its_prize(pool, outcome)


@pytest.mark.parametrize("strategy", strategy_names(breaks=None, deferred=False))
def test_safe_strategies_hold_one_user_to_the_limit_across_processes(strategy, make_pool, make_user):
    pool = make_pool(prizes=(("Gold", 50),), draws_per_user=LIMIT, strategy=strategy)
    user = make_user().pk
    outcome = draw_concurrently(pool_id=pool.pk, plan=[[user]] * PROCESSES, race_ms=RACE_MS)
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert audit.ok, audit
    assert audit.draws <= LIMIT, audit
    assert_every_confirmed_draw_is_recorded_once_with_its_prize(pool, outcome)
    # A draw told busy asks to be sent again (on a loaded machine a lock strategy may tell
    # all eight): sent one at a time, the user's draws reach the limit exactly.
    for _ in range(LIMIT - audit.draws):
        pool_draw(user=get_user_model()(pk=user), pool=pool_get(pool_id=pool.pk))
    with pytest.raises(DrawLimit):
        pool_draw(user=get_user_model()(pk=user), pool=pool_get(pool_id=pool.pk))
    assert pool_audit(pool_id=pool.pk).draws == LIMIT
