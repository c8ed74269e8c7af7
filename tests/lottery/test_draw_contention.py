"""Draws that meet other transactions on their rows, on the real MariaDB: a deadlock with an
expiry answers ``busy`` (rolled back whole, nothing lost); draws of one user at once past one
number of theirs are ``busy``, not over a limit they have not reached; a change of the prize
drawn waits for the draw, never deadlocks with it."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from inventory.errors import LockBusy
from inventory.holds import holds_expire_due
from lottery.errors import DrawLimit
from lottery.models import Draw, Prize
from lottery.product import POOL
from lottery.selectors import pool_audit, pool_get
from lottery.services import pool_draw, prize_update

from ..buyers import draw_concurrently
from ..waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class Last:
    """The choice's randomness at its top: the last prize of the candidates."""

    def randrange(self, n: int) -> int:
        return n - 1

    def random(self) -> float:
        return 0.999


class First(Last):
    def randrange(self, n: int) -> int:
        return 0

    def random(self) -> float:
        return 0.0


def acting(answers: dict, ids: dict):
    """A thread's target: ``act(name, action)`` notes its connection's id under ``name`` in
    ``ids``, then what ``action()`` answered, or raised, in ``answers``."""

    def act(name: str, action) -> None:
        try:
            connection.ensure_connection()
            ids[name] = connection.connection.thread_id()
            answers[name] = action()
        except Exception as exc:  # noqa: BLE001  (the answer the test reads)
            answers[name] = exc
        finally:
            connection.close()

    return act


def running(thread_id: int, statement: str) -> bool:
    """Whether the connection runs a statement like ``statement`` (SQL's LIKE): one that,
    while another transaction holds its rows, waits. (InnoDB's list of transactions may not
    show the wait.)"""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s AND INFO LIKE %s", [thread_id, statement]
        )
        return bool(cursor.fetchone()[0])


def test_a_draw_that_deadlocks_with_an_expiry_answers_busy_and_nothing_is_lost(make_pool, make_user):
    """A buyer's draw takes prize C's last unit, its transaction held open. The draw under test
    chooses C too, and waits; the expiry locks A, then waits for C. Once C is sold, the draw's
    UPDATE misses C but keeps its lock, chooses A in the same transaction and waits for the
    expiry: a deadlock. Its victim, the draw, answered 500; now ``busy``. (Under ``redis_lock``
    the buyer's take would hold the pool's lock until its commit, and the draw wait there.)"""
    pool = make_pool(prizes=(("A", 6), ("C", 2)), strategy="db_atomic", hold_seconds=600, draws_per_user=5)
    first, second, buyer, drawer = (get_user_model()(pk=make_user().pk) for _ in range(4))
    pool_draw(user=first, pool=pool_get(pool_id=pool.pk), rng=Last())
    pool_draw(user=second, pool=pool_get(pool_id=pool.pk), rng=First())
    Draw.objects.filter(pool=pool).update(hold_until=timezone.now() - timedelta(seconds=5))
    answers, ids, bought, sell = {}, {}, threading.Event(), threading.Event()
    act = acting(answers, ids)

    def buy_and_hold() -> Draw:
        with transaction.atomic():
            won = pool_draw(user=buyer, pool=pool_get(pool_id=pool.pk), rng=Last())
            bought.set()
            sell.wait(60)
        return won

    threads = [
        threading.Thread(target=act, args=("buyer", buy_and_hold)),
        threading.Thread(
            target=act, args=("draw", lambda: pool_draw(user=drawer, pool=pool_get(pool_id=pool.pk), rng=Last()))
        ),
        threading.Thread(target=act, args=("expiry", lambda: holds_expire_due(POOL, item_id=pool.pk))),
    ]
    try:
        threads[0].start()
        wait_until(lambda: bought.is_set() or "buyer" in answers, "the buyer's draw", timeout=30)
        assert answers.get("buyer") is None, answers
        threads[1].start()
        draws = "UPDATE `inventory_stock` SET `quantity`%"
        wait_until(lambda: "draw" in ids and running(ids["draw"], draws), "the draw waits for C", timeout=30)
        threads[2].start()
        wait_until(lambda: "expiry" in ids and running(ids["expiry"], "%FOR UPDATE%"), "the expiry waits", timeout=30)
    finally:
        sell.set()
        for thread in threads:
            if thread.is_alive() or thread.ident is not None:
                thread.join(30)
    assert answers["buyer"].prize.name == "C"
    drawn, expired = answers["draw"], answers["expiry"]
    # InnoDB chooses as its victim the transaction that changed least: the draw, whose UPDATE
    # missed; it answered 500.
    assert isinstance(drawn, LockBusy), drawn
    assert expired == 2, expired
    holds_expire_due(POOL, item_id=pool.pk)  # what a victim expiry left, the next run does
    audit = pool_audit(pool_id=pool.pk)
    assert audit.ok and audit.totals_agree, audit


@pytest.mark.parametrize("strategy", ["db_atomic", "db_pessimistic", "db_optimistic"])
def test_a_users_draws_at_once_past_one_number_are_busy_not_over_their_limit(strategy, make_pool, make_user):
    """Three draws of a user with five to draw, each in a process of its own, all counting no
    earlier draw: one is written as the user's first, and the others, refused by the backstop
    on that number, were told ``draw_limit``."""
    pool = make_pool(prizes=(("Gold", 50),), draws_per_user=5, strategy=strategy)
    user = make_user().pk
    outcome = draw_concurrently(pool_id=pool.pk, plan=[[user]] * 3, race_ms=50)
    assert outcome.refusals["draw_limit"] == 0, outcome.refusals
    assert outcome.refusals["busy"] >= 1, outcome  # they met
    assert len(outcome.confirmed) + outcome.refusals["busy"] == 3, outcome
    assert not outcome.unexpected, outcome.unexpected
    assert pool_audit(pool_id=pool.pk).draws == len(outcome.confirmed)


@pytest.mark.parametrize("strategy", ["db_pessimistic", "db_atomic"])
def test_a_prize_renamed_and_restocked_while_drawn_waits_for_the_draw_and_deadlocks_not(
    strategy, make_pool, make_user, settings
):
    """The draw holds the prize's stock row (``GUARD_HOLD_MS`` keeps it there) and then writes
    its record, whose foreign key reads the prize's row. The change locked the prize's row
    first, then waited for the stock row: a deadlock, answered 500."""
    pool = make_pool(prizes=(("Gold", 10),), strategy=strategy, draws_per_user=5)
    prize = pool.prizes.get()
    drawer = get_user_model()(pk=make_user().pk)
    settings.GUARD_HOLD_MS = 3000
    answers, ids = {}, {}
    act = acting(answers, ids)

    wrote = threading.Event()

    def stock_written(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith("UPDATE `inventory_stock`"):
            wrote.set()
        return result

    def draw_noting_its_write() -> Draw:
        with connection.execute_wrapper(stock_written):
            return pool_draw(user=drawer, pool=pool_get(pool_id=pool.pk))

    draw = threading.Thread(target=act, args=("draw", draw_noting_its_write))
    change = threading.Thread(
        target=act, args=("change", lambda: prize_update(prize=Prize.objects.get(pk=prize.pk), name="Gold!", restock=3))
    )
    draw.start()
    try:
        assert wrote.wait(30), answers
        change.start()
        wait_until(lambda: "change" in ids and running(ids["change"], "%inventory_stock%"), "the change waits")
        assert "draw" not in answers  # still holding its row: the two met
    finally:
        draw.join(30)
        if change.ident is not None:
            change.join(30)
    assert isinstance(answers["draw"], Draw) and answers["change"] is not None, answers
    assert not isinstance(answers["change"], Exception), answers["change"]
    prize.refresh_from_db()
    assert prize.name == "Gold!"
    assert pool_audit(pool_id=pool.pk).ok


def test_a_draw_after_a_gap_in_the_users_numbers_is_numbered_above_them(make_pool, make_user):
    """Numbered by the user's count plus one, a draw after a gap (a ``redis_lua`` reservation
    undone frees its number; here a draw deleted) took a number in use, and every draw after it
    clashed: ``busy`` for ever."""
    pool = make_pool(prizes=(("Gold", 50),), draws_per_user=5, strategy="db_atomic")
    user = get_user_model()(pk=make_user().pk)
    for _ in range(3):
        pool_draw(user=user, pool=pool_get(pool_id=pool.pk))
    Draw.objects.filter(pool=pool, seq=2).delete()
    numbers = [pool_draw(user=user, pool=pool_get(pool_id=pool.pk)).seq for _ in range(3)]
    assert numbers == [4, 5, 6]  # five draws held: 1, 3 and these
    with pytest.raises(DrawLimit):
        pool_draw(user=user, pool=pool_get(pool_id=pool.pk))
