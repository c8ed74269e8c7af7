"""The layout of a group's state in Redis (``inventory.redis_lua.scripts``): a user's takes and take
numbers in one field, the counters beside the rows, and a state left by the earlier layout
replaced by the next load rather than read."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest
import redis
from django.conf import settings

from inventory.redis_lua.client import Reservations
from inventory.redis_lua.reconcile import group_check
from inventory.redis_lua.values import GroupKeys, reservation_id

from .test_reservations import _groups, open_rules


@pytest.fixture
def client():
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


@pytest.fixture
def group(client):
    """A fresh group id; its keys are deleted afterwards."""
    group_id = next(_groups)
    yield group_id
    client.delete(*GroupKeys.of(group_id).all())


def field(client, group: int, name) -> str | None:
    value = client.hget(GroupKeys.of(group).state, name)
    return None if value is None else value.decode()


def live_head(client, group: int) -> tuple[int, int, int, int]:
    """``live``'s counter, takes, units left and kick deadline."""
    return tuple(int(x) for x in struct.unpack_from(">dddd", client.hget(GroupKeys.of(group).state, "live")))


def test_a_users_takes_and_numbers_are_one_field_that_stays_short(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=4), stock={1: 10}, takers={7: 2}, seqs={7: [1, 3]})
    assert field(client, group, 7) == "2:1,3"  # number 2 freed by an undone take
    assert reservations.reserve(group_id=group, user_id=7, rand=0.0).seq == 2
    assert field(client, group, 7) == "3"  # 1 to 3 again: the short form
    assert (reservations.reserve(group_id=group, user_id=7, rand=0.0).seq, field(client, group, 7)) == (4, "4")
    undone = [p for p in reservations.pending(group_id=group, consumer="a") if p.seq == 2]
    assert reservations.release(group_id=group, pending=undone[0], why="refused")
    assert (field(client, group, 7), reservations.takes(group_id=group, user_id=7)) == ("3:1,3,4", 3)


def test_takes_that_share_a_number_in_the_database_all_count_against_the_limit(client, group):
    """Two draws of one user under one number, written before the guard: both count."""
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=3), stock={1: 10}, takers={5: 2}, seqs={5: [1]})
    first = reservations.reserve(group_id=group, user_id=5, rand=0.0)
    assert (first.seq, first.takes, field(client, group, 5)) == (2, 3, "3:1,2")
    assert reservations.reserve(group_id=group, user_id=5, rand=0.0).refusal == "limit"


def test_the_state_keeps_the_total_of_takes_that_reconciliation_compares(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=2, no_take=1), stock={1: 3, 2: 0}, takers={3: 1})
    for user in (3, 4, 4):
        reservations.reserve(group_id=group, user_id=user, rand=0.99)  # nothing taken: still a take
    assert live_head(client, group)[1:3] == (4, 3)  # 4 takes; 3 units left
    check = group_check(
        group_id=group,
        reservations=reservations,
        database_stock=lambda: {1: 3, 2: 0},
        database_takes=lambda: ({3: 1}, [(3, 1)]),
        database_takes_total=lambda: 1,
        totals_first=True,
    )
    assert (check.state, check.drifted, check.pending) == (True, False, 3)


def test_a_state_of_the_earlier_layout_is_no_state_and_the_next_load_replaces_it(client, group):
    keys = GroupKeys.of(group)
    client.hset(keys.state, mapping={"begin_ms": 0, "end_ms": 10**14, "limit": 1, "no_take": 0, "stock:1": 5})
    client.hset(keys.takers, 8, 1)
    client.hset(keys.seqs, "8:1", 1)
    client.set(keys.kick, 1)
    client.set(keys.ids, 40)
    reservations = Reservations(client)
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).refusal == "unavailable"
    assert reservations.stock(group_id=group) is None  # nothing is read from it
    assert not reservations.add_units(group_id=group, stock_id=1, units=1)
    assert reservations.load(group_id=group, rules=open_rules(), stock={1: 5}, takers={8: 1})
    assert not client.exists(keys.takers, keys.seqs, keys.kick)
    assert set(client.hkeys(keys.state)) == {b"rules", b"live", b"8"}
    reserved = reservations.reserve(group_id=group, user_id=1, rand=0.0)
    assert reserved.reservation_id == reservation_id(group, 41)  # the earlier counter goes on
    assert reservations.reserve(group_id=group, user_id=8, rand=0.0).refusal == "limit"


def test_a_dropped_state_leaves_its_counter_for_the_next_load(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 5})
    last = reservations.reserve(group_id=group, user_id=1, rand=0.0).reservation_id
    reservations.done(group_id=group, pending=reservations.pending(group_id=group, consumer="a"))
    reservations.drop(group_id=group)
    client.delete(GroupKeys.of(group).pending)  # and the stream lost: the kept counter still knows
    assert reservations.load(group_id=group, rules=open_rules(), stock={1: 4}, takers={1: 1})
    assert reservations.reserve(group_id=group, user_id=2, rand=0.0).reservation_id == last + 1


def test_rows_below_zero_weigh_nothing_and_keep_their_place(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=9), stock={1: 2, 2: -1, 3: 1})
    assert live_head(client, group)[2] == 3  # left: 2 + 1
    taken = [reservations.reserve(group_id=group, user_id=1, rand=0.99).stock_id for _ in range(3)]
    assert taken == [3, 1, 1]
    assert reservations.reserve(group_id=group, user_id=1, rand=0.5).refusal == "sold_out"
    assert reservations.stock(group_id=group) == {1: 0, 2: -1, 3: 0}
    assert reservations.add_units(group_id=group, stock_id=2, units=2) == 1
    assert reservations.reserve(group_id=group, user_id=1, rand=0.5).stock_id == 2


def test_a_state_refuses_a_take_routed_by_another_number_of_states_and_counts_nothing(client, group):
    """A state names how many states its item is spread over: a take whose caller read the
    item before a rebucket, and so routed its user by the old number, is refused ``moved``
    with nothing reserved; routed by the state's own number, it reserves."""
    reservations = Reservations(client)
    assert reservations.load(group_id=group, rules=replace(open_rules(), states=3), stock={1: 5})

    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).refusal == "moved"
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0, states=2).refusal == "moved"
    assert live_head(client, group)[1:3] == (0, 5) and field(client, group, 1) is None
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0, states=3).refusal is None
    assert live_head(client, group)[1:3] == (1, 4)
