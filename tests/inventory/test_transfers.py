"""Units moved between the states of a bucketed redis_lua item, on a real Redis and in real
processes: borrowing when the home state is empty, a mover killed between TRANSFER_OUT and
TRANSFER_IN, a transfer stalled across a rebuild, the rebalancer, and a three-master cluster."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
import signal
from collections import Counter
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from inventory.buckets import home_bucket
from inventory.redis_lua.bucket_states import item_states, reserve_at_home, states_layout, states_load
from inventory.redis_lua.client import Reservations
from inventory.redis_lua.transfers import MOST_TRANSIT_MS, Transfers
from inventory.redis_lua.values import GroupKeys, Rules

pytestmark = pytest.mark.live

# Group ids below 2**25 (a bucketed group's states need it), far from the test database's own.
_groups = itertools.count(random.randrange(10**3, 2 * 10**4) * 1000)


def open_rules() -> Rules:
    now = timezone.now()
    return Rules(begin_at=now - timedelta(minutes=1), end_at=now + timedelta(hours=1), limit=1)


@pytest.fixture
def client():
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


def load(reservations: Reservations, states: list[int], units: list[int]) -> str:
    """Load every state (bucket b holds row 1000 + b) under one fresh epoch, as a rebuild does."""
    for state in states:
        reservations.client.delete(*GroupKeys.of(state).all())
    return states_load(reservations, states, rules=open_rules(), stock=[{1000 + b: n} for b, n in enumerate(units)])


@pytest.fixture
def item(client):
    """A bucketed item's 8 states; their keys are deleted afterwards."""
    group = next(_groups)
    states = item_states(group, 8)
    yield states
    for state in states:
        client.delete(*GroupKeys.of(state).all())


def units_where(reservations: Reservations, states: list[int]) -> Counter:
    """Units per row: left in any state's live, plus reserved (in the streams)."""
    found: Counter = Counter()
    for state in states:
        for row, units in (reservations.stock(group_id=state) or {}).items():
            found[row] += units
        for _, fields in reservations.client.xrange(GroupKeys.of(state).pending):
            found[int(fields[b"stock"])] += 1
    return +found  # rows with units only


def buy(reservations: Reservations, transfers: Transfers, states: list[int], user: int):
    return reserve_at_home(reservations, transfers, states, user_id=user, rand=random.random())


def _buyers(url: str, states: list[int], users: list[int], queue) -> None:
    client = redis.Redis.from_url(url)
    reservations, transfers = Reservations(client), Transfers(client)
    queue.put([(user, buy(reservations, transfers, states, user).refusal) for user in users])


def test_many_processes_sell_exactly_the_supply_one_per_user_borrowing_across_states(client, item):
    """8 processes, 300 buyers (100 of them trying twice) for 100 units, half the states empty."""
    reservations = Reservations(client)
    supply = [25, 0, 25, 0, 25, 0, 25, 0]
    load(reservations, item, supply)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    users = list(range(1, 301)) + list(range(1, 101))
    random.shuffle(users)
    plans = [users[p::8] for p in range(8)]
    processes = [context.Process(target=_buyers, args=(settings.REDIS_URL, item, plan, queue)) for plan in plans]
    for process in processes:
        process.start()
    answers = [one for _ in processes for one in queue.get(timeout=120)]
    for process in processes:
        process.join(10)
    sold = [user for user, refusal in answers if refusal is None]
    assert len(sold) == sum(supply)
    assert len(set(sold)) == len(sold)  # one per user, whichever process they came through
    assert {refusal for _, refusal in answers} <= {None, "sold_out", "limit"}
    assert units_where(reservations, item) == {1000 + b: units for b, units in enumerate(supply) if units}
    assert all(not client.hlen(GroupKeys.of(state).outbox) for state in item)
    assert sum(client.xlen(GroupKeys.of(state).pending) for state in item[1::2]) > 0  # the empty ones borrowed
    # Each buyer's take is marked in their home state, where RESERVE checks it.
    for user in set(sold):
        assert reservations.takes(group_id=item[home_bucket(user, 8)], user_id=user) == 1


def test_the_layout_is_read_from_bucket_0s_own_load_which_comes_last(client, item, monkeypatch):
    """A load that stops before bucket 0 (the process killed) leaves no layout that names the
    states it did not load; once bucket 0 is loaded, its rules name all eight, with nothing
    written after them."""
    reservations = Reservations(client)
    real = reservations.load

    def stop_at_bucket_0(**kwargs):
        if kwargs["group_id"] == item[0]:
            raise KeyboardInterrupt("killed")
        return real(**kwargs)

    monkeypatch.setattr(reservations, "load", stop_at_bucket_0)
    with pytest.raises(KeyboardInterrupt):
        load(reservations, item, [1] * 8)
    assert states_layout(reservations, item[0]) == 1  # nothing says eight: a release goes nowhere wrong
    monkeypatch.setattr(reservations, "load", real)
    load(reservations, item, [1] * 8)
    assert states_layout(reservations, item[0]) == 8
    assert b"states" not in client.hkeys(GroupKeys.of(item[0]).state)


def test_a_layout_loaded_before_the_rules_held_it_is_read_from_its_field(client, item):
    """A state loaded by the earlier code: shorter rules, the layout in a field of its own."""
    reservations = Reservations(client)
    load(reservations, item, [1] * 8)
    state = GroupKeys.of(item[0]).state
    client.hset(state, mapping={"rules": client.hget(state, "rules")[:56], "states": 8})
    assert states_layout(reservations, item[0]) == 8


def test_a_transfer_is_applied_once_however_often_in_runs(client, item):
    reservations, transfers = Reservations(client), Transfers(client)
    load(reservations, item, [10, 0, 0, 0, 0, 0, 0, 0])
    tid, said = transfers.out(giver=item[0], receiver=item[1], most=4)
    _, epoch, at_ms, units, rows = said.split(" ")
    assert units == "4" and rows == "1000:4"
    for _ in range(3):
        assert transfers.into(receiver=item[1], tid=tid, epoch=epoch, at_ms=int(at_ms), rows=rows) == "applied"
    assert reservations.stock(group_id=item[1]) == {1001: 0, 1000: 4}  # the giver's row, borrowed
    assert transfers.recover(item) == 1  # the entry finished, nothing added again
    assert units_where(reservations, item) == {1000: 10}


def test_out_gives_at_most_half_and_the_last_unit(client, item):
    reservations, transfers = Reservations(client), Transfers(client)
    load(reservations, item, [6, 1, 0, 0, 0, 0, 0, 0])
    assert transfers.move(giver=item[0], receiver=item[2], most=8) == 3
    assert transfers.move(giver=item[1], receiver=item[3], most=8) == 1
    assert transfers.move(giver=item[1], receiver=item[3], most=8) == 0


def _mover_killed_after_out(url: str, giver: int, receiver: int) -> None:
    Transfers(redis.Redis.from_url(url)).out(giver=giver, receiver=receiver, most=5)
    os.kill(os.getpid(), signal.SIGKILL)  # between TRANSFER_OUT and TRANSFER_IN


def _killed_mover(client, item) -> None:
    context = multiprocessing.get_context("fork")
    process = context.Process(target=_mover_killed_after_out, args=(settings.REDIS_URL, item[0], item[1]))
    process.start()
    process.join(30)
    assert process.exitcode == -signal.SIGKILL
    assert client.hlen(GroupKeys.of(item[0]).outbox) == 1


def test_a_mover_killed_between_out_and_in_is_finished_by_the_recovery(client, item):
    reservations, transfers = Reservations(client), Transfers(client)
    load(reservations, item, [20, 0, 0, 0, 0, 0, 0, 0])
    _killed_mover(client, item)
    assert units_where(reservations, item) == {1000: 15}  # 5 in the outbox
    assert transfers.units(item)[0].outbox == 5  # seen in transit, so a buyer does not stop
    assert transfers.recover(item) == 1
    assert reservations.stock(group_id=item[1]) == {1000: 5, 1001: 0}
    assert units_where(reservations, item) == {1000: 20}
    assert transfers.recover(item) == 0  # nothing twice


def test_a_transfer_stalled_across_a_rebuild_is_refused_by_the_epoch(client, item):
    reservations, transfers = Reservations(client), Transfers(client)
    load(reservations, item, [20, 0, 0, 0, 0, 0, 0, 0])
    tid, said = transfers.out(giver=item[0], receiver=item[1], most=5)
    _, epoch, at_ms, _, rows = said.split(" ")
    # A rebuild: every state loaded again from the database, which still counts the 5 units.
    outbox = client.hgetall(GroupKeys.of(item[0]).outbox)
    load(reservations, item, [20, 0, 0, 0, 0, 0, 0, 0])
    client.hset(GroupKeys.of(item[0]).outbox, mapping=outbox)  # even were the outbox kept
    assert transfers.into(receiver=item[1], tid=tid, epoch=epoch, at_ms=int(at_ms), rows=rows) == "epoch"
    assert transfers.recover(item) == 1  # cancelled: the rebuilt giver counts them already
    assert units_where(reservations, item) == {1000: 20}


def test_a_missing_receiver_or_a_stale_transfer_is_refused_and_cancelled_back_to_the_giver(client, item):
    reservations, transfers = Reservations(client), Transfers(client)
    load(reservations, item, [20, 0, 0, 0, 0, 0, 0, 0])
    _killed_mover(client, item)
    client.delete(GroupKeys.of(item[1]).state)
    assert transfers.recover(item) == 1
    assert reservations.stock(group_id=item[0]) == {1000: 20}
    tid, said = transfers.out(giver=item[0], receiver=item[2], most=2)
    _, epoch, at_ms, _, rows = said.split(" ")
    stale = int(at_ms) - MOST_TRANSIT_MS - 1
    assert transfers.into(receiver=item[2], tid=tid, epoch=epoch, at_ms=stale, rows=rows) == "stale"


def test_applied_marks_are_pruned_once_old_and_finished(client, item):
    reservations, transfers = Reservations(client), Transfers(client)
    load(reservations, item, [20, 0, 0, 0, 0, 0, 0, 0])
    assert transfers.move(giver=item[0], receiver=item[1], most=2) == 2
    assert client.hlen(GroupKeys.of(item[1]).applied) == 1
    transfers.recover(item)
    assert client.hlen(GroupKeys.of(item[1]).applied) == 1  # young: kept
    transfers.recover(item, prune_after_ms=0)
    assert client.hlen(GroupKeys.of(item[1]).applied) == 0


def test_a_mark_is_pruned_by_the_receivers_clock_against_the_senders_time(client, item):
    """The giver's clock 10 s ahead of the receiver's: IN measures the transfer's age as
    the receiver's time less the giver's, and so does the prune. Pruned by the receiver's
    time of IN, the mark went while IN would still apply the transfer, and a recovery stalled
    with the entry read applied it twice."""
    reservations, transfers = Reservations(client), Transfers(client)
    load(reservations, item, [20, 0, 0, 0, 0, 0, 0, 0])
    tid, said = transfers.out(giver=item[0], receiver=item[1], most=2)
    _, epoch, at_ms, _, rows = said.split(" ")
    sent = int(at_ms) + 10_000
    assert transfers.into(receiver=item[1], tid=tid, epoch=epoch, at_ms=sent, rows=rows) == "applied"
    client.hdel(GroupKeys.of(item[0]).outbox, tid)  # the mover finished
    transfers.recover(item, prune_after_ms=0)
    assert client.hlen(GroupKeys.of(item[1]).applied) == 1  # sent in the receiver's future: kept
    assert transfers.into(receiver=item[1], tid=tid, epoch=epoch, at_ms=sent, rows=rows) == "applied"
    assert reservations.stock(group_id=item[1])[1000] == 2  # once


def test_the_rebalancer_fills_empty_states_from_the_fullest(client, item):
    reservations, transfers = Reservations(client), Transfers(client)
    load(reservations, item, [80, 0, 0, 0, 0, 0, 0, 0])
    assert transfers.rebalance(item) > 0
    left = [one.left for one in transfers.units(item)]
    assert all(units >= 1 for units in left)
    assert sum(left) == 80


def test_a_bucketed_items_states_spread_over_the_masters_of_a_cluster(redis_cluster):
    reservations, transfers = Reservations(redis_cluster), Transfers(redis_cluster)
    states = item_states(next(_groups), 8)
    try:
        nodes = {redis_cluster.get_node_from_key(GroupKeys.of(state).state).port for state in states}
        assert len(nodes) == 3
        load(reservations, states, [4, 0, 0, 0, 0, 0, 0, 0])
        sold = [user for user in range(1, 40) if buy(reservations, transfers, states, user).refusal is None]
        assert len(sold) == 4
        for state in states:
            assert not redis_cluster.hlen(GroupKeys.of(state).outbox)
    finally:
        for state in states:
            redis_cluster.delete(*GroupKeys.of(state).all())


def _buyer_killed_in_a_move(url: str, states: list[int], users: list[int], queue, moving) -> None:
    """A buyer process that dies (SIGKILL) at its second move, between OUT and IN, as it lets
    the crowd go: however the machine schedules the processes, the death falls mid-move and
    the crowd sells beside the unit it left in transit."""
    moves = itertools.count(1)
    into = Transfers.into

    def into_or_die(self, **arguments):
        if next(moves) == 2:
            moving.set()
            os.kill(os.getpid(), signal.SIGKILL)
        return into(self, **arguments)

    Transfers.into = into_or_die
    _buyers(url, states, users, queue)


def _crowd(url: str, states: list[int], users: list[int], queue, moving) -> None:
    assert moving.wait(60), "the doomed buyer never moved a unit"
    _buyers(url, states, users, queue)


def test_a_buyer_killed_mid_move_in_a_crowd_loses_and_doubles_nothing(client, item):
    """8 processes buy 60 units spread over 2 of 8 states; one dies between OUT and IN of a
    borrow. The others sell on (a unit found only in transit is finished by the taker), and
    after the recovery every unit is sold or left, once."""
    reservations, transfers = Reservations(client), Transfers(client)
    supply = [30, 0, 0, 0, 30, 0, 0, 0]
    load(reservations, item, supply)
    context = multiprocessing.get_context("fork")
    queue, moving = context.Queue(), context.Event()
    plans = [list(range(p * 40 + 1, p * 40 + 41)) for p in range(8)]
    targets = [_buyer_killed_in_a_move] + [_crowd] * 7
    processes = [
        context.Process(target=target, args=(settings.REDIS_URL, item, plan, queue, moving))
        for target, plan in zip(targets, plans, strict=True)
    ]
    for process in processes:
        process.start()
    answers = [one for _ in processes[1:] for one in queue.get(timeout=120)]
    for process in processes:
        process.join(30)
    assert processes[0].exitcode == -signal.SIGKILL
    transfers.recover(item)
    assert all(not client.hlen(GroupKeys.of(state).outbox) for state in item)
    assert units_where(reservations, item) == {1000: 30, 1004: 30}  # every unit sold or left, once
    sold = [user for user, refusal in answers if refusal is None]
    assert len(set(sold)) == len(sold)
    left = sum(one.left for one in transfers.units(item))
    entries = sum(client.xlen(GroupKeys.of(state).pending) for state in item)
    assert entries + left == 60
    assert len(sold) >= 60 - 40 - left  # the dead process's buyers took at most their 40


class BeatenToEveryUnit(Transfers):
    """Another borrower that, each time this one moves a unit home, moves it first to a state
    of its own: the unit is always somewhere, never where this one looks."""

    def __init__(self, client, states: list[int], home: int) -> None:
        super().__init__(client)
        self.states, self.home, self.beaten = states, home, 0

    def move(self, *, giver: int, receiver: int, most: int) -> int:
        if receiver == self.states[self.home]:
            other = next(state for state in self.states if state not in (giver, receiver))
            assert super().move(giver=giver, receiver=other, most=most)
            self.beaten += 1
        return super().move(giver=giver, receiver=receiver, most=most)


def test_a_take_beaten_to_every_unit_it_would_bring_home_is_busy_not_sold_out(client, item):
    reservations = Reservations(client)
    states = item[:3]
    user = next(user for user in itertools.count(1) if home_bucket(user, 3) == 0)
    load(reservations, states, [0, 1, 0])  # one unit, in bucket 1
    transfers = BeatenToEveryUnit(client, states, home=0)
    answer = reserve_at_home(reservations, transfers, states, user_id=user, rand=0.5)
    assert answer.refusal == "busy" and transfers.beaten >= 20
    assert sum(units_where(reservations, states).values()) == 1  # still there: not sold out
