"""The draw's own rules: window, per-user limit, "no prize", an empty pool, and the odds'
integer arithmetic. Concurrency is the strategies' contract (tests/inventory) and the
pool's invariants under many processes (test_concurrency.py)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from core.window import Ended, NotStarted
from inventory.models import Stock
from inventory.strategies import strategy_names
from lottery.errors import DrawLimit, PoolEmpty
from lottery.models import Draw
from lottery.product import pool_for_draw, weighted_choice
from lottery.selectors import pool_audit, pool_get, pool_odds
from lottery.services import pool_draw

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("redlock_urls")]


class Tickets:
    """A fake ``rng`` that hands out the tickets it is given, in order."""

    def __init__(self, *tickets: int) -> None:
        self.tickets = list(tickets)
        self.asked: list[int] = []

    def randrange(self, stop: int) -> int:
        self.asked.append(stop)
        return self.tickets.pop(0)


def test_each_row_gets_exactly_as_many_tickets_as_it_has_units():
    remaining = {7: 3, 2: 1, 9: 4}
    total = 3 + 1 + 4 + 5
    outcomes = [weighted_choice(no_prize_weight=5, rng=Tickets(ticket))(remaining) for ticket in range(total)]
    # Rows walked in id order: 2 (1 ticket), 7 (3), 9 (4), then "no prize" (5).
    assert outcomes == [2, 7, 7, 7, 9, 9, 9, 9, None, None, None, None, None]


def test_the_ticket_is_drawn_from_the_sum_of_stock_and_the_no_prize_weight():
    rng = Tickets(0)
    weighted_choice(no_prize_weight=10**9, rng=rng)({1: 10**8, 2: 3})
    assert rng.asked == [10**9 + 10**8 + 3]  # whole numbers all the way


@pytest.mark.parametrize("strategy", strategy_names(deferred=False))
def test_a_draw_awards_a_prize_and_takes_its_unit(strategy, make_pool, make_user):
    pool = make_pool(prizes=(("Gold", 1), ("Silver", 2)), strategy=strategy)
    user = make_user()
    draw = pool_draw(user=user, pool=pool, rng=Tickets(0))  # ticket 0: the first prize
    gold = pool.prizes.all()[0]
    assert (draw.prize_id, draw.user_id, draw.seq, draw.status) == (gold.pk, user.pk, 1, "confirmed")
    assert Stock.objects.get(pk=gold.stock_id).quantity == 0
    assert pool_audit(pool_id=pool.pk).ok


def test_a_no_prize_draw_is_recorded_and_counts_against_the_limit(make_pool, make_user):
    pool = make_pool(prizes=(("Gold", 1),), no_prize_weight=5, draws_per_user=1)
    user = make_user()
    draw = pool_draw(user=user, pool=pool, rng=Tickets(3))  # tickets 1..5 are "no prize"
    assert draw.prize is None
    assert Stock.objects.get(pk=pool.prizes.all()[0].stock_id).quantity == 1
    with pytest.raises(DrawLimit):
        pool_draw(user=user, pool=pool_get(pool_id=pool.pk), rng=Tickets(0))
    assert Draw.objects.filter(pool=pool).count() == 1


@pytest.mark.parametrize("strategy", strategy_names(breaks=None, deferred=False))
def test_the_limit_refuses_the_next_draw_and_writes_nothing(strategy, make_pool, make_user):
    pool = make_pool(prizes=(("Gold", 10),), draws_per_user=2, strategy=strategy)
    user = make_user()
    for _ in range(2):
        pool_draw(user=user, pool=pool_get(pool_id=pool.pk))
    with pytest.raises(DrawLimit):
        pool_draw(user=user, pool=pool_get(pool_id=pool.pk))
    assert Draw.objects.filter(pool=pool, user=user).count() == 2
    assert Stock.objects.get(pk=pool.prizes.all()[0].stock_id).quantity == 8


def test_the_limit_is_per_pool(make_pool, make_user):
    user = make_user()
    first, second = make_pool(draws_per_user=1, name="first"), make_pool(draws_per_user=1, name="second")
    pool_draw(user=user, pool=first)
    assert pool_draw(user=user, pool=second).seq == 1


@pytest.mark.parametrize("no_prize_weight", [0, 50])
def test_an_empty_pool_answers_pool_empty_and_counts_nothing(no_prize_weight, make_pool, make_user):
    pool = make_pool(prizes=(("Gold", 0), ("Silver", 0)), no_prize_weight=no_prize_weight)
    with pytest.raises(PoolEmpty):
        pool_draw(user=make_user(), pool=pool)
    assert not Draw.objects.exists()


def test_the_pool_empties_under_the_strategy_even_when_the_read_still_showed_stock(make_pool, make_user):
    pool = make_pool(prizes=(("Gold", 1),), strategy="db_pessimistic")
    stale = pool_get(pool_id=pool.pk)  # read while Gold still had a unit
    pool_draw(user=make_user(), pool=pool)
    with pytest.raises(PoolEmpty):
        pool_draw(user=make_user(), pool=stale)
    assert Draw.objects.count() == 1


def test_a_user_at_the_limit_of_an_empty_pool_hears_draw_limit(make_pool, make_user):
    pool = make_pool(prizes=(("Gold", 1),), draws_per_user=1)
    user = make_user()
    pool_draw(user=user, pool=pool)
    with pytest.raises(DrawLimit):
        pool_draw(user=user, pool=pool_get(pool_id=pool.pk))


def test_draws_outside_the_window_are_refused(make_pool, make_user):
    upcoming = make_pool(starts_in=timedelta(minutes=5))
    ended = make_pool(starts_in=-timedelta(hours=2), lasts=timedelta(hours=1))
    with pytest.raises(NotStarted):
        pool_draw(user=make_user(), pool=upcoming)
    with pytest.raises(Ended):
        pool_draw(user=make_user(), pool=ended)
    assert not Draw.objects.exists()


def test_a_seeded_rng_repeats_the_same_draws(make_pool, make_user):
    def run() -> list:
        pool = make_pool(prizes=(("A", 5), ("B", 5), ("C", 5)), no_prize_weight=5, draws_per_user=10)
        rng, user = random.Random(7), make_user()
        names = []
        for _ in range(10):
            draw = pool_draw(user=user, pool=pool_get(pool_id=pool.pk), rng=rng)
            names.append(draw.prize.name if draw.prize else None)
        return names

    assert run() == run()


def test_the_odds_are_stock_over_stock_plus_the_no_prize_weight(make_pool):
    pool = make_pool(prizes=(("A", 1), ("B", 3)), no_prize_weight=4)
    odds = pool_odds(pool=pool)
    a, b = pool.prizes.all()
    assert odds.by_prize == {a.pk: 0.125, b.pk: 0.375}
    assert odds.no_prize == 0.5
    empty = pool_odds(pool=make_pool(prizes=(("A", 0),), no_prize_weight=4))
    assert (list(empty.by_prize.values()), empty.no_prize, empty.empty) == ([0.0], 0.0, True)


def test_an_emptied_pool_read_for_a_draw_refuses_with_two_queries(make_pool, make_user, django_assert_num_queries):
    pool = make_pool(prizes=(("Gold", 1),))
    pool_draw(user=make_user(), pool=pool)
    user = make_user()
    with django_assert_num_queries(2):  # the pool with its stock summed, and the user's draw count
        with pytest.raises(PoolEmpty):
            pool_draw(user=user, pool=pool_for_draw(pool_id=pool.pk))
