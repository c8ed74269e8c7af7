"""A unit's life after its take, on every strategy (``inventory.holds``): held until its
deadline, then settled or released, its unit back in the stock exactly once, whoever
releases it and however many at once; ``none`` and ``local`` shown failing at it.

Many processes hammer the same records here (``tests/buyers.py``); the expiry by a real
worker and beat is in ``tests/test_holds_worker.py``.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from math import ceil
from random import Random

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from core.namespace import instance_key
from inventory import take as take_module
from inventory.errors import (
    AlreadyClaimed,
    AlreadyPaid,
    HoldCancelled,
    HoldExpired,
    HoldForfeited,
    HoldPending,
    LockBusy,
)
from inventory.holds import hold_release, hold_settle, holds_expire_due
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.drain import group_lock
from inventory.redis_lua.item_states import item_reservations_check, item_reservations_reconcile
from inventory.strategies import STRATEGIES, strategy_names
from inventory.take import hold_expire_later
from inventory.totals import group_rows
from lottery.errors import DrawLimit
from lottery.models import Draw, Pool
from lottery.product import POOL
from lottery.selectors import draw_get, pool_audit, pool_audits, pool_get
from lottery.services import draw_claim, pool_draw
from orders.errors import AlreadyPurchased
from orders.models import Order, Voucher
from orders.product import VOUCHER
from orders.selectors import order_get, voucher_audit, voucher_get
from orders.services import order_cancel, order_purchase
from tests.records import answered_row
from tests.stock import stock_left, stock_row

from .buyers import act_concurrently
from .test_redis_lua import persist_pool, persist_voucher

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]

EVERY = strategy_names()
GUARDED = [name for name in EVERY if STRATEGIES[name].guarded]


@pytest.fixture
def strategy(request):
    """The strategy of the test's parameter, with what it needs (Redlock's servers)."""
    if request.param == "redlock":
        request.getfixturevalue("redlock_urls")
    return request.param


def windowed(voucher: Voucher, seconds: int = 60) -> Voucher:
    Voucher.objects.filter(pk=voucher.pk).update(hold_seconds=seconds)
    return voucher_get(voucher_id=voucher.pk)


def buy(voucher: Voucher, user) -> Order:
    """``user``'s purchase, written (a redis_lua one persisted as the worker would)."""
    order = order_purchase(user=user, voucher=voucher_get(voucher_id=voucher.pk))
    if order.status == Order.Status.PENDING:
        persist_voucher(voucher)
        return answered_row(Order, order.public_id)
    return order


def stock_of(voucher: Voucher) -> int:
    return stock_left(voucher)


@pytest.mark.parametrize("strategy", EVERY, indirect=True)
def test_a_held_order_cancelled_returns_its_unit_once_and_its_buyer_may_buy_again(make_voucher, make_user, strategy):
    # No cooldown after a cancel (docs/design.md, "Abandoned holds"): the buyer buys again at once.
    voucher = windowed(make_voucher(stock=1, strategy=strategy, abandon_cooldown_seconds=0))
    first = make_user()
    order = buy(voucher, first)
    assert order.status == Order.Status.HELD
    assert timedelta(seconds=55) < order.hold_until - timezone.now() <= timedelta(seconds=60)
    assert stock_of(voucher) == 0

    cancelled = order_cancel(order=order_get(user=first, order_id=order.public_id))

    assert cancelled.status == Order.Status.CANCELLED
    assert stock_of(voucher) == 1
    with pytest.raises(HoldCancelled):
        order_cancel(order=order_get(user=first, order_id=order.public_id))
    assert stock_of(voucher) == 1
    if strategy == "redis_lua":
        assert reservations_client().stock(group_id=voucher.group_id) == {stock_row(voucher): 1}
    again = buy(voucher, first)  # a cancelled order does not count against one per user
    assert again.status == Order.Status.HELD and stock_of(voucher) == 0
    with pytest.raises(AlreadyPurchased):
        buy(voucher, first)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert (audit.holds.held, audit.holds.released, audit.holds.returned_twice, audit.conserved, audit.ok) == (
        1,
        1,
        0,
        True,
        True,
    )
    if strategy == "redis_lua":
        assert not item_reservations_check(VOUCHER, item=voucher_get(voucher_id=voucher.pk)).drifted


@pytest.mark.parametrize("strategy", EVERY, indirect=True)
def test_a_payment_settles_a_held_order_before_its_deadline_and_not_after(make_voucher, make_user, strategy):
    voucher = windowed(make_voucher(stock=2, strategy=strategy))
    payer, late = make_user(), make_user()
    paid = hold_settle(VOUCHER, buy(voucher, payer))
    assert paid.status == Order.Status.PAID and paid.settled_at is not None
    with pytest.raises(AlreadyPaid):
        hold_settle(VOUCHER, Order.objects.get(pk=paid.pk))
    with pytest.raises(AlreadyPaid):
        order_cancel(order=order_get(user=payer, order_id=paid.public_id))

    order = buy(voucher, late)
    with pytest.raises(HoldExpired):
        hold_settle(VOUCHER, order, now=order.hold_until + timedelta(milliseconds=1))
    assert Order.objects.get(pk=order.pk).status == Order.Status.EXPIRED
    assert stock_of(voucher) == 1
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert (audit.holds.settled, audit.holds.held, audit.holds.released, audit.ok) == (1, 0, 1, True)


def test_an_order_still_being_written_is_refused_pending(make_voucher, make_user, api_client):
    voucher = windowed(make_voucher(stock=1, strategy="redis_lua"))
    buyer = make_user()
    pending = order_purchase(user=buyer, voucher=voucher_get(voucher_id=voucher.pk))
    assert pending.status == Order.Status.PENDING
    with pytest.raises(HoldPending):
        order_cancel(order=order_get(user=buyer, order_id=pending.public_id))


# Per held order: two payments, an expiry and a cancel, all at once.
ACTIONS = ("settle", "settle", "expire", "cancel")
BUSY_TRIES = 5


def change_concurrently(orders: list[Order], *, processes: int, race_ms: int):
    """Every action of ``ACTIONS`` on every order, spread over ``processes`` processes and
    released together."""
    slots = [(order.pk, action) for order in orders for action in ACTIONS]
    plan = [slots[i::processes] for i in range(processes)]

    def act(slot) -> str:
        order_pk, action = slot
        # Told busy, nothing was written: a client sends it again, as these do a few times, so
        # that a lock strategy on a loaded machine cannot leave an order with no change at all.
        for attempt in range(BUSY_TRIES):
            order = Order.objects.get(pk=order_pk)
            try:
                if action == "settle":
                    return hold_settle(VOUCHER, order).status
                target = Order.Status.EXPIRED if action == "expire" else Order.Status.CANCELLED
                return hold_release(VOUCHER, order, target=target).status
            except LockBusy:
                if attempt == BUSY_TRIES - 1:
                    raise

    return act_concurrently(act=act, plan=plan, race_ms=race_ms)


@pytest.mark.race
@pytest.mark.parametrize("strategy", GUARDED, indirect=True)
def test_payments_cancels_and_expiries_racing_change_each_order_once(make_voucher, make_user, strategy):
    voucher = windowed(make_voucher(stock=6, strategy=strategy))
    orders = [buy(voucher, make_user()) for _ in range(6)]

    outcome = change_concurrently(orders, processes=4, race_ms=30)

    assert outcome.errors == []
    # Exactly one change of each order; every other action was refused in its state's words.
    assert len(outcome.confirmed) == len(orders)
    assert set(outcome.refusals) <= {"already_paid", "expired", "cancelled", "busy"}
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    holds = audit.holds
    assert holds.held == 0 and holds.settled + holds.released == len(orders)
    assert (holds.returned_twice, holds.settled_and_released, audit.conserved, audit.ok) == (0, 0, True, True)
    assert stock_of(voucher) == holds.released
    if strategy == "redis_lua":
        assert not item_reservations_check(VOUCHER, item=voucher_get(voucher_id=voucher.pk)).drifted


@pytest.mark.race
@pytest.mark.parametrize("strategy", ["none", "local"], indirect=True)
def test_the_naive_strategies_pay_and_release_one_order_or_release_it_twice(make_voucher, make_user, strategy):
    voucher = windowed(make_voucher(stock=3, strategy=strategy))
    orders = [buy(voucher, make_user()) for _ in range(3)]

    # A process each: within one, local's lock serialises the actions.
    outcome = change_concurrently(orders, processes=len(orders) * len(ACTIONS), race_ms=150)

    assert outcome.errors == []
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert audit.holds.returned_twice + audit.holds.settled_and_released > 0, audit
    assert not audit.conserved and not audit.ok


@pytest.mark.race
@pytest.mark.parametrize("strategy", GUARDED, indirect=True)
def test_sweeps_run_at_once_by_many_processes_release_each_due_hold_once(make_voucher, make_user, strategy):
    voucher = windowed(make_voucher(stock=24, strategy=strategy))
    orders = [buy(voucher, make_user()) for _ in range(24)]
    Order.objects.filter(pk__in=[order.pk for order in orders[:20]]).update(hold_until=timezone.now())

    def sweep(_) -> int:
        released = 0
        while done := holds_expire_due(VOUCHER, item_id=voucher.pk, batch=3):
            released += done
        return released

    outcome = act_concurrently(act=sweep, plan=[[0, 1], [2, 3], [4, 5]], race_ms=10)

    assert outcome.errors == [] and sum(outcome.confirmed) == 20
    assert stock_of(voucher) == 20
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert (audit.holds.held, audit.holds.released, audit.holds.returned_twice, audit.ok) == (4, 20, 0, True)
    if strategy == "redis_lua":
        assert reservations_client().stock(group_id=voucher.group_id) == {stock_row(voucher): 20}
        assert not item_reservations_check(VOUCHER, item=voucher_get(voucher_id=voucher.pk)).drifted


def test_sweeps_racing_under_none_release_one_hold_twice(make_voucher, make_user):
    voucher = windowed(make_voucher(stock=4, strategy="none"))
    orders = [buy(voucher, make_user()) for _ in range(4)]
    Order.objects.filter(pk__in=[order.pk for order in orders]).update(hold_until=timezone.now())

    outcome = act_concurrently(
        act=lambda _: holds_expire_due(VOUCHER, item_id=voucher.pk), plan=[[0], [1], [2]], race_ms=200
    )

    assert outcome.errors == [] and sum(outcome.confirmed) > 4
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert audit.holds.returned_twice > 0 and stock_of(voucher) > 4 and not audit.ok


def windowed_pool(make_pool, *, strategy: str, prizes, draws_per_user: int = 1, seconds: int = 60) -> Pool:
    pool = make_pool(strategy=strategy, prizes=prizes, draws_per_user=draws_per_user)
    Pool.objects.filter(pk=pool.pk).update(hold_seconds=seconds)
    return pool_get(pool_id=pool.pk)


def draw(pool: Pool, user) -> Draw:
    made = pool_draw(user=user, pool=pool_get(pool_id=pool.pk))
    if made.status == Draw.Status.PENDING:
        persist_pool(pool)
        return answered_row(Draw, made.public_id)
    return made


@pytest.mark.parametrize("strategy", EVERY, indirect=True)
def test_a_won_prize_is_held_until_claimed_and_forfeited_after(make_pool, make_user, strategy):
    pool = windowed_pool(make_pool, strategy=strategy, prizes=(("Gold", 2),))
    winner, sleeper = make_user(), make_user()
    won = draw(pool, winner)
    assert won.status == Draw.Status.HELD and won.prize_id is not None
    claimed = draw_claim(draw=draw_get(user=winner, draw_id=won.public_id))
    assert claimed.status == Draw.Status.CLAIMED
    with pytest.raises(AlreadyClaimed):
        draw_claim(draw=draw_get(user=winner, draw_id=won.public_id))

    lost = draw(pool, sleeper)
    with pytest.raises(HoldForfeited):
        draw_claim(draw=draw_get(user=sleeper, draw_id=lost.public_id), now=lost.hold_until)
    assert Draw.objects.get(pk=lost.pk).status == Draw.Status.FORFEITED
    # A forfeited draw still counts against the limit, and its prize is back in the pool.
    with pytest.raises(DrawLimit):
        draw(pool, sleeper)
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert (audit.holds.settled, audit.holds.released, audit.stock, audit.awarded, audit.ok) == (1, 1, 1, 1, True)
    if strategy == "redis_lua":
        assert not item_reservations_check(POOL, item=pool_get(pool_id=pool.pk)).drifted


def test_a_draw_of_no_prize_is_settled_at_once(make_pool, make_user):
    pool = windowed_pool(make_pool, strategy="db_atomic", prizes=(("Gold", 1),))
    Pool.objects.filter(pk=pool.pk).update(no_prize_weight=1)

    class NoPrize(Random):
        def randrange(self, stop):  # the last ticket: the weight of no prize
            return stop - 1

    nothing = pool_draw(user=make_user(), pool=pool_get(pool_id=pool.pk), rng=NoPrize())
    assert nothing.status == Draw.Status.CONFIRMED and nothing.hold_until is None

    # Settled, but no prize: the audit's claimed count is of prizes, as its awarded is.
    class Gold(Random):
        def randrange(self, stop):  # the first ticket: Gold's
            return 0

    won = pool_draw(user=make_user(), pool=pool_get(pool_id=pool.pk), rng=Gold())
    draw_claim(draw=draw_get(user=won.user, draw_id=won.public_id))
    audit = pool_audit(pool_id=pool.pk)
    assert (audit.awarded, audit.holds.settled, audit.no_prize_draws, audit.ok) == (1, 1, 1, True), audit
    assert pool_audits(pool_ids=[pool.pk])[0].holds.settled == 1


@pytest.mark.parametrize("strategy", GUARDED, indirect=True)
def test_due_prizes_are_forfeited_once_by_the_sweep(make_pool, make_user, strategy):
    pool = windowed_pool(make_pool, strategy=strategy, prizes=(("Gold", 3), ("Silver", 3)))
    draws = [draw(pool, make_user()) for _ in range(6)]
    Draw.objects.filter(pk__in=[one.pk for one in draws]).update(hold_until=timezone.now())

    released = holds_expire_due(POOL, item_id=pool.pk) + holds_expire_due(POOL, item_id=pool.pk)

    assert released == 6
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert (audit.stock, audit.awarded, audit.holds.released, audit.holds.returned_twice, audit.ok) == (
        6,
        0,
        6,
        0,
        True,
    )
    if strategy == "redis_lua":
        assert not item_reservations_check(POOL, item=pool_get(pool_id=pool.pk)).drifted


@pytest.mark.race
@pytest.mark.parametrize("strategy", GUARDED, indirect=True)
def test_sweeps_and_late_claims_racing_over_a_pools_rows_return_each_prize_once(make_pool, make_user, strategy):
    """The expiry's batches (``StockStrategy.expire``) and single releases (a claim past its
    deadline forfeits the prize, through ``StockStrategy.change``) at the same records, whose
    units go back to three stock rows: each unit once, whichever releases it."""
    pool = windowed_pool(make_pool, strategy=strategy, prizes=(("Gold", 4), ("Silver", 4), ("Bronze", 4)))
    winners = [make_user() for _ in range(12)]
    draws = [draw(pool, winner) for winner in winners]
    Draw.objects.filter(pk__in=[one.pk for one in draws]).update(hold_until=timezone.now())

    def act(slot) -> int | str:
        if slot is None:  # a sweep, in batches of two
            released = 0
            while done := holds_expire_due(POOL, item_id=pool.pk, batch=2):
                released += done
            return released
        user_id, draw_id = slot
        return draw_claim(draw=draw_get(user=get_user_model()(pk=user_id), draw_id=draw_id)).status

    claims = [(winner.pk, won.public_id) for winner, won in zip(winners, draws, strict=True)]
    outcome = act_concurrently(act=act, plan=[[*claims[i::3], None] for i in range(3)], race_ms=10)

    assert outcome.errors == [] and set(outcome.refusals) <= {"forfeited", "busy"}, outcome
    assert outcome.refusals["forfeited"] + outcome.refusals["busy"] == len(claims)
    holds_expire_due(POOL, item_id=pool.pk)  # the next sweep: what a busy claim left held
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree, audit
    assert (audit.stock, audit.awarded, audit.holds.released, audit.holds.returned_twice, audit.ok) == (
        12,
        0,
        12,
        0,
        True,
    )
    if strategy == "redis_lua":
        rows = group_rows(group_id=pool.group_id)
        assert reservations_client().stock(group_id=pool.group_id) == {row: 4 for row in rows}
        assert not item_reservations_check(POOL, item=pool_get(pool_id=pool.pk)).drifted


def test_only_the_owner_may_cancel(make_voucher, make_user):
    from django.http import Http404

    voucher = windowed(make_voucher(stock=1))
    order = buy(voucher, make_user())
    with pytest.raises(Http404):
        order_cancel(order=order_get(user=make_user(), order_id=order.public_id))
    assert Order.objects.get(pk=order.pk).status == Order.Status.HELD


def test_a_voucher_without_a_window_is_paid_when_bought(make_voucher, make_user):
    order = buy(make_voucher(stock=1), make_user())
    assert order.status == Order.Status.CONFIRMED and order.hold_until is None
    with pytest.raises(AlreadyPaid):
        order_cancel(order=order_get(user=get_user_model().objects.get(pk=order.user_id), order_id=order.public_id))


def test_redis_restarted_empty_with_units_held_is_rebuilt_without_them_and_their_return_lands(
    make_voucher, make_user, reservations_redis
):
    voucher = windowed(make_voucher(stock=5, strategy="redis_lua"))
    holders = [make_user() for _ in range(3)]
    orders = [buy(voucher, holder) for holder in holders]
    # Redis restarted empty, for this instance: other test workers' states share the database.
    for key in reservations_redis.scan_iter(match=instance_key("res:{group:*")):
        reservations_redis.delete(key)

    item_reservations_reconcile(VOUCHER, item=voucher_get(voucher_id=voucher.pk))

    group_id = voucher.group_id
    # The held units stay taken: two left, and each holder still counts as a buyer.
    assert reservations_client().stock(group_id=group_id) == {stock_row(voucher): 2}
    assert reservations_client().takers(group_id=group_id) == {holder.pk: 1 for holder in holders}
    order_cancel(order=order_get(user=holders[0], order_id=orders[0].public_id))
    Order.objects.filter(pk=orders[1].pk).update(hold_until=timezone.now())
    assert holds_expire_due(VOUCHER, item_id=voucher.pk) == 1
    assert reservations_client().stock(group_id=group_id) == {stock_row(voucher): 4}
    assert reservations_client().takers(group_id=group_id) == {holders[2].pk: 1}
    assert not item_reservations_check(VOUCHER, item=voucher_get(voucher_id=voucher.pk)).drifted
    assert voucher_audit(voucher_id=voucher.pk).ok


def test_a_return_that_missed_redis_is_made_good_by_reconciliation(make_voucher, make_user, settings):
    # No cooldown after the cancel (docs/design.md, "Abandoned holds"): the holder buys again.
    voucher = windowed(make_voucher(stock=2, strategy="redis_lua", abandon_cooldown_seconds=0))
    holder = make_user()
    order = buy(voucher, holder)
    reachable = settings.RESERVATIONS_REDIS_URL
    settings.RESERVATIONS_REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    # Committed; the return to Redis fails (the order is read first: finding it asks Redis too).
    hold_release(VOUCHER, Order.objects.get(pk=order.pk), target=Order.Status.CANCELLED)
    settings.RESERVATIONS_REDIS_URL = reachable
    assert stock_of(voucher) == 2
    item = voucher_get(voucher_id=voucher.pk)
    assert item_reservations_check(VOUCHER, item=item).drifted

    item_reservations_reconcile(VOUCHER, item=item)

    assert reservations_client().stock(group_id=voucher.group_id) == {stock_row(voucher): 2}
    assert not item_reservations_check(VOUCHER, item=item).drifted
    assert buy(voucher, holder).status == Order.Status.HELD  # the holder may buy again


def test_a_sweep_releases_every_other_items_holds_when_one_items_release_fails(make_voucher, make_user, settings):
    """A ``redis_lua`` voucher whose group lock someone holds (its release waits for it, then
    is busy) comes first in the sweep's order: the ``db_atomic`` voucher after it is released
    all the same, and the busy one at the next sweep."""
    settings.LOCK_WAIT_SECONDS = 0.2
    busy = windowed(make_voucher(stock=3, strategy="redis_lua", starts_in=-timedelta(minutes=5)))
    other = windowed(make_voucher(stock=3, strategy="db_atomic"))
    held = [buy(busy, make_user()), buy(other, make_user())]
    later = timezone.now() + timedelta(minutes=2)
    lock = group_lock(busy.group_id)
    assert lock.acquire()
    try:
        assert holds_expire_due(VOUCHER, now=later) == 1
    finally:
        lock.release()
    assert [answered_row(Order, order.public_id).status for order in held] == ["held", "expired"]
    assert holds_expire_due(VOUCHER, now=later) == 1
    assert answered_row(Order, held[0].public_id).status == "expired"


def test_an_item_whose_release_fails_and_fills_the_batch_does_not_hold_up_the_next(make_voucher, make_user, settings):
    """The sweep reads the items of the first due rows, as many rows as it may release: one
    item failing with every one of them is passed over within the same call."""
    settings.LOCK_WAIT_SECONDS = 0.2
    busy = windowed(make_voucher(stock=3, strategy="redis_lua"))
    other = windowed(make_voucher(stock=3, strategy="db_atomic"))
    first, then = buy(busy, make_user()), buy(other, make_user())
    later = timezone.now() + timedelta(minutes=2)
    lock = group_lock(busy.group_id)
    assert lock.acquire()
    try:
        assert holds_expire_due(VOUCHER, now=later, batch=1) == 1
    finally:
        lock.release()
    assert [answered_row(Order, order.public_id).status for order in (first, then)] == ["held", "expired"]


def test_an_item_whose_due_rows_another_release_holds_is_passed_over_for_the_next(make_voucher, make_user):
    """Its own expiry task holds its rows (the sweep skips them, and releases nothing of it):
    the sweep goes on to the next item's, where it once ended with nothing released."""
    first = windowed(make_voucher(stock=3))
    second = windowed(make_voucher(stock=3))
    held = [buy(first, make_user()), buy(second, make_user())]
    later = timezone.now() + timedelta(minutes=2)
    locked, done = threading.Event(), threading.Event()

    def another_release() -> None:
        try:
            with transaction.atomic():
                list(Order.objects.select_for_update().filter(voucher=first))
                locked.set()
                done.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=another_release)
    holder.start()
    assert locked.wait(10)
    try:
        assert holds_expire_due(VOUCHER, now=later, batch=1) == 1
    finally:
        done.set()
        holder.join()
    assert [answered_row(Order, order.public_id).status for order in held] == ["held", "expired"]


def test_a_deadline_asked_for_by_a_take_rolled_back_is_not_taken_for_asked():
    """A take's expiry task is sent once its transaction commits, and its deadline noted as
    asked for then: noted before, a take rolled back (a batch of records written again half
    by half) left the deadline's second asked for with no task, and every take of that second
    in this process after it asked for none."""
    deadline = timezone.now() + timedelta(seconds=30)
    noted = (VOUCHER.kind, 10**9, ceil(deadline.timestamp()))
    with pytest.raises(RuntimeError), transaction.atomic():
        hold_expire_later(VOUCHER, 10**9, [deadline])
        raise RuntimeError("the take rolled back")
    assert noted not in take_module._asked
