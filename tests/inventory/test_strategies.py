"""The contract every strategy of the registry keeps, whatever product takes stock through it.

Parametrized over ``inventory.strategies.STRATEGIES``: a strategy added to the registry
is held to the same contract with no change here. The products (vouchers, pools)
then test only their own rules.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from django.db import connection, transaction
from django.db.models import F

from core.namespace import key_prefix
from inventory.errors import LockBusy, SoldOut
from inventory.models import Stock, StockGroup
from inventory.services import stock_create, stock_group_create
from inventory.strategies import STRATEGIES, strategy_names
from inventory.strategies.base import Take
from inventory.strategies.changes import rule_scope
from locking import Lock
from locking.integration import locks_redis

from ..buyers import act_concurrently
from ..waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redlock_urls")]

ALL = strategy_names(deferred=False)
SAFE = strategy_names(breaks=None, deferred=False)
NAIVE = strategy_names(breaks="always") + strategy_names(breaks="across_processes")


def make_group(*quantities: int) -> tuple[StockGroup, list[int]]:
    group = stock_group_create()
    return group, [stock_create(group=group, quantity=quantity).pk for quantity in quantities]


def stock_of(ids: list[int]) -> list[int]:
    quantities = dict(Stock.objects.filter(pk__in=ids).values_list("id", "quantity"))
    return [quantities[stock_id] for stock_id in ids]


def first(remaining):
    return min(remaining)


def a_take(group: StockGroup, **overrides) -> Take:
    options = {
        "group_id": group.pk,
        "choose": first,
        "kind": "test",
        "item_id": group.pk,
        "user_id": 1,
        "check": lambda: None,
        "record": lambda stock_id, guarded: stock_id,
    }
    return Take(**(options | overrides))


def test_the_registry_names_every_strategy_once_and_says_which_ones_break():
    everyone = strategy_names()
    assert set(everyone) == set(STRATEGIES) == set(ALL) | {"redis_lua"}
    assert strategy_names(deferred=True) == ["redis_lua"]  # reserves in Redis; a worker writes the record
    assert {name: STRATEGIES[name].breaks for name in everyone if STRATEGIES[name].breaks} == {
        "none": "always",
        "local": "across_processes",
    }
    assert all(STRATEGIES[name].guarded for name in SAFE)


@pytest.mark.parametrize("strategy", ALL)
def test_a_take_decrements_the_chosen_row_and_records_it_once(strategy):
    group, (a, b) = make_group(3, 4)
    recorded = []

    def record(stock_id, guarded):
        recorded.append((stock_id, guarded))
        return "the record"

    result = STRATEGIES[strategy].take(a_take(group, choose=lambda remaining: b, record=record))
    assert result == "the record"
    assert recorded == [(b, STRATEGIES[strategy].guarded)]
    assert stock_of([a, b]) == [3, 3]


@pytest.mark.parametrize("strategy", ALL)
def test_the_chooser_is_offered_only_rows_with_stock(strategy):
    group, (empty, a, b) = make_group(0, 2, 5)
    offered = []

    def choose(remaining):
        offered.append(dict(remaining))
        return a

    STRATEGIES[strategy].take(a_take(group, choose=choose))
    assert offered == [{a: 2, b: 5}]


@pytest.mark.parametrize("strategy", ALL)
def test_choosing_nothing_records_without_taking(strategy):
    group, (a,) = make_group(2)
    recorded = []
    STRATEGIES[strategy].take(a_take(group, choose=lambda remaining: None, record=lambda s, g: recorded.append(s)))
    assert recorded == [None]
    assert stock_of([a]) == [2]


@pytest.mark.parametrize("strategy", ALL)
def test_empty_stock_raises_sold_out_and_records_nothing(strategy):
    group, ids = make_group(0, 0)
    recorded = []
    with pytest.raises(SoldOut):
        STRATEGIES[strategy].take(a_take(group, record=lambda s, g: recorded.append(s)))
    assert recorded == []
    assert stock_of(ids) == [0, 0]


@pytest.mark.parametrize("strategy", ALL)
def test_check_runs_first_inside_the_guard_and_a_refusal_writes_nothing(strategy):
    group, (a,) = make_group(2)
    seen = {}

    class Refused(Exception):
        pass

    def check():
        seen["in_transaction"] = not connection.get_autocommit()
        if STRATEGIES[strategy].name == "local":
            seen["process_lock_held"] = STRATEGIES[strategy]._lock_for(group.pk).locked()
        if STRATEGIES[strategy].name in ("redis_lock", "redlock"):
            # The buyer's own lock is held: a second attempt of this user is refused at once.
            other = threading.Thread(target=lambda: seen.setdefault("second", _second_take(strategy, group)))
            other.start()
            other.join()
        raise Refused()

    with pytest.raises(Refused):
        STRATEGIES[strategy].take(a_take(group, check=check))
    # The safe strategies check inside their guard's transaction. The naive ones check
    # (and read) with plain autocommit queries, as naive code does, and open a
    # transaction only for the write and the record; local's guard is its process lock.
    assert seen["in_transaction"] == (strategy not in NAIVE)
    if "process_lock_held" in seen:
        assert seen["process_lock_held"]
    if "second" in seen:
        assert seen["second"] == "busy"
    assert stock_of([a]) == [2]


def _second_take(strategy: str, group: StockGroup) -> str:
    try:
        STRATEGIES[strategy].take(a_take(group))
    except LockBusy:
        return "busy"
    finally:
        connection.close()
    return "taken"


@pytest.mark.parametrize("strategy", ALL)
def test_record_runs_in_the_transaction_of_the_decrement(strategy):
    group, (a,) = make_group(2)

    class RecordFailed(Exception):
        pass

    def record(stock_id, guarded):
        assert not connection.get_autocommit()
        raise RecordFailed()

    with pytest.raises(RecordFailed):
        STRATEGIES[strategy].take(a_take(group, record=record))
    assert stock_of([a]) == [2]  # the decrement was rolled back with the failed record


@pytest.mark.parametrize("strategy", NAIVE)
def test_the_naive_strategies_hold_a_transaction_only_around_the_write_and_the_record(strategy):
    # Nothing is held across the read, the choice and the race window, on any database:
    # the textbook race, which SQLite's serialised transactions would otherwise hide.
    group, (a,) = make_group(2)
    seen = []

    def choose(remaining):
        seen.append(("choose", connection.get_autocommit()))
        return first(remaining)

    def record(stock_id, guarded):
        seen.append(("record", connection.get_autocommit()))

    STRATEGIES[strategy].take(a_take(group, choose=choose, record=record))
    assert seen == [("choose", True), ("record", False)]
    assert stock_of([a]) == [1]


def _optimistic_loses_every_compare(group: StockGroup, settings):
    def choose(remaining):
        # Another writer bumps the version between every read and write.
        StockGroup.objects.filter(pk=group.pk).update(version=F("version") + 1)
        return first(remaining)

    return a_take(group, choose=choose), lambda: None


def _atomic_misses_every_write(group: StockGroup, settings):
    settings.ATOMIC_MAX_ATTEMPTS = 1

    def choose(remaining):
        chosen = first(remaining)
        Stock.objects.filter(pk=chosen).update(quantity=0)  # gone between the read and the write
        return chosen

    return a_take(group, choose=choose), lambda: None


def _group_lock_held_elsewhere(strategy: str):
    def provoke(group: StockGroup, settings):
        settings.LOCK_WAIT_SECONDS = 0.2
        lock = STRATEGIES[strategy]._lock(f"stock-group:{group.pk}", blocking=False)
        assert lock.acquire()
        return a_take(group), lock.release

    return provoke


# How each strategy that can answer "busy" is made to: a strategy added to the registry
# with a way to give up under contention adds its provocation here.
BUSY = {
    "db_optimistic": _optimistic_loses_every_compare,
    "db_atomic": _atomic_misses_every_write,
    "redis_lock": _group_lock_held_elsewhere("redis_lock"),
    "redlock": _group_lock_held_elsewhere("redlock"),
}
NEVER_BUSY = {"none", "local", "db_pessimistic"}  # they wait, or do not guard at all


def test_every_strategy_is_either_provoked_to_busy_or_never_busy():
    assert set(BUSY) | NEVER_BUSY == set(ALL)


@pytest.mark.parametrize("strategy", sorted(BUSY))
def test_busy_leaves_nothing_written(strategy, settings):
    group, ids = make_group(2, 3)
    version_before = StockGroup.objects.get(pk=group.pk).version
    recorded = []
    take, cleanup = BUSY[strategy](group, settings)
    try:
        with pytest.raises(LockBusy):
            STRATEGIES[strategy].take(replace(take, record=lambda s, g: recorded.append(s)))
    finally:
        cleanup()
    assert recorded == []
    assert stock_of(ids) == [2, 3]
    assert StockGroup.objects.get(pk=group.pk).version == version_before


def test_redis_lock_waits_for_the_group_lock_then_writes(settings):
    settings.LOCK_WAIT_SECONDS = 5
    group, (a,) = make_group(2)
    held = Lock(locks_redis(), f"stock-group:{group.pk}", key_prefix=key_prefix(), lease=5)
    assert held.acquire()
    writes: list[tuple[str, int]] = []

    def record(stock_id, guarded):
        writes.append(("take", stock_id))
        return stock_id

    def take() -> None:
        try:
            taken.append(STRATEGIES["redis_lock"].take(a_take(group, record=record)))
        finally:
            connection.close()

    taken: list[int] = []
    taker = threading.Thread(target=take)
    taker.start()
    # Queued behind the holder: it has read and chosen, and waits for the group lock.
    wait_until(lambda: locks_redis().llen(held.queue_key) == 1, "the take queues for the group lock")
    assert taker.is_alive() and writes == [] and stock_of([a]) == [2]  # nothing written while it waits
    Stock.objects.filter(pk=a).update(quantity=F("quantity") - 1)  # the holder's own write
    writes.append(("holder", a))
    held.release()
    taker.join(timeout=10)
    assert not taker.is_alive() and taken == [a]
    assert writes == [("holder", a), ("take", a)]
    assert stock_of([a]) == [0]  # the take wrote after the holder, on the row the holder left


def _take_one(group_id: int, strategy: str, user: int) -> int | None:
    def choose(remaining):
        return sorted(remaining)[user % len(remaining)]

    take = Take(
        group_id=group_id,
        choose=choose,
        kind="contract",
        item_id=group_id,
        user_id=user,
        check=lambda: None,
        record=lambda stock_id, guarded: stock_id,
    )
    return STRATEGIES[strategy].take(take)


@pytest.mark.race
@pytest.mark.parametrize("strategy", ALL)
def test_stock_never_goes_below_zero_with_many_processes(strategy):
    """8 processes x 4 threads take from two rows of 3 and 2 units, released together.

    Every strategy keeps stock at or above zero (the naive ones oversell by losing
    updates, not by going negative); the safe ones also take exactly one unit per
    confirmed take, and no more than the supply."""
    group, ids = make_group(3, 2)
    plan = [[8 * p + t for t in range(4)] for p in range(8)]
    outcome = act_concurrently(
        act=lambda user: _take_one(group.pk, strategy, user),
        plan=plan,
        race_ms=20,
    )
    assert not outcome.errors, outcome.errors[0]
    left = stock_of(ids)
    assert min(left) >= 0
    if STRATEGIES[strategy].breaks is None:
        assert len(outcome.confirmed) == 5 - sum(left)
        for stock_id, supplied, remaining in zip(ids, (3, 2), left, strict=True):
            assert outcome.confirmed.count(stock_id) == supplied - remaining
        assert set(outcome.refusals) <= {"sold_out", "busy"}
    print(f"\n{strategy}: confirmed {len(outcome.confirmed)} of 5 supplied, stock left {left}")


def test_a_take_inside_a_callers_transaction_is_part_of_it(settings):
    group, (a,) = make_group(2)
    for strategy in ALL:
        with pytest.raises(RuntimeError), transaction.atomic():
            STRATEGIES[strategy].take(a_take(group))
            raise RuntimeError("the caller rolls back")
    assert stock_of([a]) == [2]


def test_redis_locks_guard_of_the_per_user_rule_leaves_no_key_per_buyer():
    """Its user lock holds no fence: a counter per user of each item, never expiring, would
    keep a key for every buyer a site ever had. Its group lock's fence, one per item, stays."""
    group, (a,) = make_group(5)
    for user_id in (1, 2, 3):
        STRATEGIES["redis_lock"].take(a_take(group, user_id=user_id))
    fences = [f"{key_prefix()}lock:{{{rule_scope('test', group.pk, user_id)}}}:fence" for user_id in (1, 2, 3)]
    assert locks_redis().exists(*fences) == 0
    assert locks_redis().exists(f"{key_prefix()}lock:{{stock-group:{group.pk}}}:fence")


@pytest.mark.parametrize("strategy", ["redis_lock", "redlock"])
def test_a_take_made_stands_when_redis_fails_at_the_locks_release(strategy, monkeypatch):
    """The COMMIT is done when the locks are let go: Redis timing out then raised, the API
    answered 503 for a take that was made, and its retry under the same idempotency key took
    again. The take's result stands; the leases end the locks."""
    import redis

    from locking.lease import LeasedLock

    def timed_out(self):
        raise redis.TimeoutError("Timeout reading from socket")

    monkeypatch.setattr(LeasedLock, "release", timed_out)
    group, (row,) = make_group(3)
    assert STRATEGIES[strategy].take(a_take(group)) == row
    assert stock_of([row]) == [2]
