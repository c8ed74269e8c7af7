"""Each strategy under real concurrency: 8 processes x 4 threads buy one voucher.

Stock is 5, there are 28 distinct buyers, and 4 buyers fire twice from two
different processes. ``RACE_WINDOW_MS`` widens the gap between check and write
identically for every strategy. Each test says which invariant (docs/design.md,
"Invariants") must hold, or which one must break: the unsafe strategies are
asserted to fail, so a test here cannot pass by doing nothing.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from inventory.records import public_of
from inventory.strategies import STRATEGIES, strategy_names
from orders.errors import AlreadyPurchased
from orders.models import Order
from orders.selectors import voucher_audit, voucher_get
from orders.services import order_purchase

from .buyers import buy_concurrently

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redlock_urls"), pytest.mark.race]

STOCK = 5
QUEUEING = [name for name in strategy_names(breaks=None, deferred=False) if not STRATEGIES[name].sheds_load]
SHEDDING = [name for name in strategy_names(breaks=None, deferred=False) if STRATEGIES[name].sheds_load]
RACE_MS = 30
PROCESSES = 8
THREADS = 4


@pytest.fixture
def crowd(make_user):
    """The plan: 8 processes x 4 buyers; buyers 0-3 also buy from the next process."""
    users = [make_user().pk for _ in range(PROCESSES * THREADS - 4)]
    repeaters = users[:4]
    rest = iter(users[4:])
    plan = []
    for p in range(PROCESSES):
        slots = []
        if p < 4:
            slots.append(repeaters[p])
        if 1 <= p <= 4:
            slots.append(repeaters[p - 1])
        while len(slots) < THREADS:
            slots.append(next(rest))
        plan.append(slots)
    assert sum(map(len, plan)) == PROCESSES * THREADS
    return plan


def assert_every_confirmed_purchase_is_one_order(voucher, outcome) -> None:
    orders = list(Order.objects.filter(voucher=voucher).values_list("id", flat=True))
    assert sorted(outcome.confirmed) == sorted(map(public_of, orders))
    assert not outcome.unexpected, outcome.unexpected


@pytest.mark.parametrize("strategy", QUEUEING)
def test_queueing_strategies_sell_exactly_the_stock_once_per_user(strategy, make_voucher, crowd):
    voucher = make_voucher(stock=STOCK, strategy=strategy)
    outcome = buy_concurrently(voucher_id=voucher.pk, plan=crowd, race_ms=RACE_MS)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert audit.ok, audit
    assert (audit.orders, audit.stock, audit.oversold, audit.duplicates) == (STOCK, 0, 0, 0)
    assert_every_confirmed_purchase_is_one_order(voucher, outcome)
    # Every other attempt was refused cleanly (redis_lock answers a buyer's own concurrent repeat "busy").
    assert sum(outcome.refusals.values()) == PROCESSES * THREADS - STOCK


@pytest.mark.parametrize("strategy", SHEDDING)
def test_load_shedding_strategies_never_oversell_and_refuse_the_rest(strategy, make_voucher, crowd):
    voucher = make_voucher(stock=STOCK, strategy=strategy)
    outcome = buy_concurrently(voucher_id=voucher.pk, plan=crowd, race_ms=RACE_MS)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert audit.ok, audit
    assert 1 <= audit.orders <= STOCK
    assert audit.stock + audit.orders == STOCK
    assert_every_confirmed_purchase_is_one_order(voucher, outcome)


def test_none_oversells_and_duplicates(make_voucher, crowd):
    voucher = make_voucher(stock=STOCK, strategy="none")
    outcome = buy_concurrently(voucher_id=voucher.pk, plan=crowd, race_ms=RACE_MS)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    # Invariants 1 and 3 break: more orders than stock, and the repeaters bought twice.
    assert audit.oversold > 0, audit
    assert not audit.conserved, audit
    assert audit.duplicates > 0, audit
    assert_every_confirmed_purchase_is_one_order(voucher, outcome)
    print(f"\nnone: supplied {STOCK}, orders {audit.orders}, oversold {audit.oversold}, duplicates {audit.duplicates}")


def test_local_holds_within_one_process(make_voucher, make_user):
    voucher = make_voucher(stock=STOCK, strategy="local")
    users = [make_user().pk for _ in range(12)]
    plan = [users + users[:4]]  # one process, 16 threads, 4 users twice
    outcome = buy_concurrently(voucher_id=voucher.pk, plan=plan, race_ms=RACE_MS)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert audit.ok, audit
    assert (audit.orders, audit.stock) == (STOCK, 0)
    assert_every_confirmed_purchase_is_one_order(voucher, outcome)


def test_local_oversells_across_processes(make_voucher, crowd):
    voucher = make_voucher(stock=STOCK, strategy="local")
    outcome = buy_concurrently(voucher_id=voucher.pk, plan=crowd, race_ms=RACE_MS)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    # Invariant 1 breaks: each process's lock admits its own buyer at the same time.
    assert audit.oversold > 0, audit
    assert not audit.conserved, audit
    assert_every_confirmed_purchase_is_one_order(voucher, outcome)
    print(
        f"\nlocal x{PROCESSES}: supplied {STOCK}, orders {audit.orders}, oversold {audit.oversold}, "
        f"duplicates {audit.duplicates}"
    )


def test_local_lets_one_user_buy_once_per_process(make_voucher, make_user):
    voucher = make_voucher(stock=STOCK, strategy="local")
    user = make_user().pk
    outcome = buy_concurrently(voucher_id=voucher.pk, plan=[[user]] * PROCESSES, race_ms=RACE_MS)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    # Invariant 3 breaks: one buyer, several orders, one per process.
    assert audit.duplicates > 0, audit
    assert_every_confirmed_purchase_is_one_order(voucher, outcome)


@pytest.mark.parametrize("strategy", strategy_names(breaks=None, deferred=False))
def test_safe_strategies_give_one_user_one_order_across_processes(strategy, make_voucher, make_user):
    voucher = make_voucher(stock=STOCK, strategy=strategy)
    user = make_user().pk
    outcome = buy_concurrently(voucher_id=voucher.pk, plan=[[user]] * PROCESSES, race_ms=RACE_MS)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert audit.ok, audit
    assert audit.orders <= 1, audit
    assert_every_confirmed_purchase_is_one_order(voucher, outcome)

    # A purchase told busy asks to be sent again (on a loaded machine a lock strategy may tell
    # every process): sent one at a time, the user gets exactly one order.
    def buy():
        return order_purchase(user=get_user_model()(pk=user), voucher=voucher_get(voucher_id=voucher.pk))

    if not audit.orders:
        buy()
    with pytest.raises(AlreadyPurchased):
        buy()
    assert voucher_audit(voucher_id=voucher.pk).orders == 1
