"""The redis_lua scripts on a real Redis, and on a real three-node Redis Cluster."""

from __future__ import annotations

import itertools
import multiprocessing
import random
import struct
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from inventory.redis_lua.client import Reservations
from inventory.redis_lua.values import (
    LOST_NUMBERS_GAP,
    PERSIST_GROUP,
    SETTLED,
    GroupKeys,
    PendingReservations,
    Rules,
    reservation_group,
    reservation_id,
    taken_field,
)

# Group ids below 2**31 (a reservation id holds 31 bits of group), far from the test database's own.
_groups = itertools.count(random.randrange(10**5, 2 * 10**6) * 1000)


def open_rules(limit: int = 1, no_take: int = 0, **window) -> Rules:
    now = timezone.now()
    return Rules(
        begin_at=window.get("begin_at", now - timedelta(minutes=1)),
        end_at=window.get("end_at", now + timedelta(hours=1)),
        limit=limit,
        no_take=no_take,
    )


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


def read_pending(client, group_id: int) -> list[tuple[str, dict]]:
    answer = client.xreadgroup(PERSIST_GROUP, "test", {GroupKeys.of(group_id).pending: ">"}, count=100)
    entries = answer[0][1] if answer else []
    return [(entry_id.decode(), {k.decode(): v.decode() for k, v in fields.items()}) for entry_id, fields in entries]


def test_a_voucher_sells_once_per_user_and_records_each_reservation(client, group):
    reservations = Reservations(client)
    assert reservations.load(group_id=group, rules=open_rules(), stock={7: 2})
    first = reservations.reserve(group_id=group, user_id=1, rand=0.5, request_id="req-of-user-1")
    # A first load counts from LOST_NUMBERS_GAP: no Redis may have lost reservations of it before.
    assert (first.refusal, first.stock_id, first.reservation_id) == (
        None,
        7,
        reservation_id(group, 1 + LOST_NUMBERS_GAP),
    )
    assert reservations.reserve(group_id=group, user_id=1, rand=0.5).refusal == "limit"
    assert reservations.reserve(group_id=group, user_id=2, rand=0.9).stock_id == 7
    assert reservations.reserve(group_id=group, user_id=3, rand=0.1).refusal == "sold_out"
    assert reservations.stock(group_id=group) == {7: 0}
    assert reservations.takers(group_id=group) == {1: 1, 2: 1}
    pending = [
        (entry_id, {k: v for k, v in fields.items() if k != "at"}) for entry_id, fields in read_pending(client, group)
    ]
    assert pending == [
        (f"{LOST_NUMBERS_GAP + 1}-0", {"user": "1", "stock": "7", "seq": "1", "rid": "req-of-user-1"}),
        (f"{LOST_NUMBERS_GAP + 2}-0", {"user": "2", "stock": "7", "seq": "1", "rid": ""}),  # made outside a request
    ]
    # The worker reads the request's id back with the reservation, for its log line.
    waiting = reservations.of_user(group_id=group, user_id=1)
    assert [(one.reservation_id, one.request_id) for one in waiting] == [(first.reservation_id, "req-of-user-1")]


def test_no_state_means_unavailable_never_a_sale_from_nothing(client, group):
    reservations = Reservations(client)
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).refusal == "unavailable"
    assert not client.exists(*GroupKeys.of(group).all())


def test_the_window_is_checked_against_redis_time(client, group):
    reservations = Reservations(client)
    later = timezone.now() + timedelta(minutes=5)
    reservations.load(group_id=group, rules=open_rules(begin_at=later, end_at=later + timedelta(hours=1)), stock={1: 5})
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).refusal == "not_started"
    client.delete(GroupKeys.of(group).state)
    earlier = timezone.now() - timedelta(hours=2)
    reservations.load(
        group_id=group, rules=open_rules(begin_at=earlier, end_at=earlier + timedelta(hours=1)), stock={1: 5}
    )
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).refusal == "ended"
    assert reservations.stock(group_id=group) == {1: 5}


def test_the_choice_is_weighted_by_the_stock_left_and_the_weight_of_taking_nothing(client, group):
    """Rows 1 (1 unit) and 2 (3 units) and a weight of 4 for nothing: [0, 1/8) takes row 1,
    [1/8, 1/2) row 2, [1/2, 1) nothing, which still counts as the user's take."""
    reservations = Reservations(client)
    for rand, expected in [(0.0, 1), (0.124, 1), (0.125, 2), (0.49, 2), (0.5, None), (0.99, None)]:
        client.delete(*GroupKeys.of(group).all())
        reservations.load(group_id=group, rules=open_rules(no_take=4), stock={2: 3, 1: 1})
        reserved = reservations.reserve(group_id=group, user_id=1, rand=rand)
        assert (reserved.refusal, reserved.stock_id) == (None, expected), rand
        assert reservations.takers(group_id=group) == {1: 1}
    # The weights are the stock left at the moment: with row 1 gone, [0, 3/7) takes row 2.
    client.delete(*GroupKeys.of(group).all())
    reservations.load(group_id=group, rules=open_rules(limit=9, no_take=4), stock={2: 3, 1: 0})
    assert reservations.reserve(group_id=group, user_id=3, rand=0.42).stock_id == 2
    assert reservations.reserve(group_id=group, user_id=3, rand=0.3).stock_id == 2  # 2 of 6 now
    assert reservations.stock(group_id=group) == {1: 0, 2: 1}
    # With every row empty, only taking nothing would be left: the group is sold out.
    client.delete(*GroupKeys.of(group).all())
    reservations.load(group_id=group, rules=open_rules(no_take=4), stock={2: 0, 1: 0})
    assert reservations.reserve(group_id=group, user_id=9, rand=0.9).refusal == "sold_out"


def test_a_pool_limit_counts_every_take(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=2, no_take=1), stock={1: 100})
    answers = [reservations.reserve(group_id=group, user_id=5, rand=0.99) for n in range(3)]
    assert [(a.refusal, a.seq) for a in answers] == [(None, 1), (None, 2), ("limit", 0)]


def test_load_never_overwrites_live_state(client, group):
    reservations = Reservations(client)
    assert reservations.load(group_id=group, rules=open_rules(), stock={1: 5}, takers={})
    reservations.reserve(group_id=group, user_id=1, rand=0.0)
    assert not reservations.load(group_id=group, rules=open_rules(), stock={1: 5})
    assert reservations.stock(group_id=group) == {1: 4}
    assert reservations.takers(group_id=group) == {1: 1}


def test_load_restores_takers_and_keeps_the_pending_stream_readable(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=3), stock={1: 5}, takers={8: 3, 9: 1})
    assert reservations.takers(group_id=group) == {8: 3, 9: 1}
    assert reservations.reserve(group_id=group, user_id=8, rand=0.0).refusal == "limit"
    reservations.reserve(group_id=group, user_id=9, rand=0.0)
    assert [fields["user"] for _, fields in read_pending(client, group)] == ["9"]


def test_release_undoes_a_pending_reservation_exactly_once(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 1})
    reserved = reservations.reserve(group_id=group, user_id=4, rand=0.0)
    (pending,) = reservations.pending(group_id=group, consumer="a")
    assert reservations.failed(reservation=reserved.reservation_id) is None
    assert reservations.release(group_id=group, pending=pending, why="the database refused it")
    assert not reservations.release(group_id=group, pending=pending, why="again")
    assert reservations.failed(reservation=reserved.reservation_id).why == "the database refused it"
    assert reservations.stock(group_id=group) == {1: 1}
    assert reservations.takers(group_id=group) == {}
    assert client.xlen(GroupKeys.of(group).pending) == 0
    # The unit is back on sale, and the user may buy again.
    assert reservations.reserve(group_id=group, user_id=4, rand=0.0).stock_id == 1


def test_release_after_the_reservation_was_persisted_does_nothing(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 1})
    reserved = reservations.reserve(group_id=group, user_id=4, rand=0.0)
    (pending,) = reservations.pending(group_id=group, consumer="a")
    reservations.done(group_id=group, pending=[pending])  # what the persisting worker does
    assert not reservations.release(group_id=group, pending=pending, why="too late")
    assert reservations.stock(group_id=group) == {1: 0}
    assert reservations.failed(reservation=reserved.reservation_id) is None


def test_add_units_only_where_the_state_is_loaded(client, group):
    reservations = Reservations(client)
    assert reservations.add_units(group_id=group, stock_id=1, units=5) is None
    assert not client.exists(GroupKeys.of(group).state)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 0})
    assert reservations.add_units(group_id=group, stock_id=1, units=5) == 5
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).stock_id == 1


def _reserve_many(url: str, group_id: int, users: range, queue) -> None:
    reservations = Reservations(redis.Redis.from_url(url))
    queue.put([reservations.reserve(group_id=group_id, user_id=u, rand=random.random()).refusal
               for u in users])  # fmt: skip


def test_many_processes_never_reserve_more_than_the_stock(client, group):
    """8 processes, 50 users each plus 50 users shared by two processes, on 3 rows of 10."""
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 10, 2: 10, 3: 10})
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    plans = [range(p * 50, p * 50 + 50) if p % 2 else range(p * 50 - 50, p * 50) for p in range(1, 9)]
    processes = [context.Process(target=_reserve_many, args=(settings.REDIS_URL, group, plan, queue)) for plan in plans]
    for process in processes:
        process.start()
    answers = [refusal for _ in processes for refusal in queue.get(timeout=60)]
    for process in processes:
        process.join(10)
    assert answers.count(None) == 30
    assert reservations.stock(group_id=group) == {1: 0, 2: 0, 3: 0}
    pending = read_pending(client, group)
    assert len(pending) == 30
    assert len({fields["user"] for _, fields in pending}) == 30  # one per user, repeaters included
    assert set(answers) <= {None, "sold_out", "limit"}


def test_the_scripts_run_unchanged_on_a_three_node_cluster(redis_cluster):
    reservations = Reservations(redis_cluster)
    groups = range(1, 31)
    nodes = {redis_cluster.get_node_from_key(GroupKeys.of(g).state).port for g in groups}
    assert len(nodes) == 3  # the groups really live on every node
    for g in groups:
        assert reservations.load(group_id=g, rules=open_rules(limit=2, no_take=1), stock={g: 1, g + 100: 1})
        first = reservations.reserve(group_id=g, user_id=1, rand=0.0)
        assert first.stock_id == g
        second = reservations.reserve(group_id=g, user_id=1, rand=0.0)
        assert second.stock_id == g + 100
        assert reservations.reserve(group_id=g, user_id=1, rand=0.0).refusal == "limit"
        taken, _ = reservations.pending(group_id=g, consumer="test")
        assert reservations.release(group_id=g, pending=taken, why="test")
        assert reservations.failed(reservation=first.reservation_id).why == "test"
        assert reservations.stock(group_id=g) == {g: 1, g + 100: 0}
        assert reservations.add_units(group_id=g, stock_id=g + 100, units=2) == 2


def test_pending_hands_each_reservation_to_one_consumer_until_done(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=2, no_take=0), stock={1: 5, 2: 5})
    for user in (1, 2, 3):
        reservations.reserve(group_id=group, user_id=user, rand=0.0)
    first = reservations.pending(group_id=group, consumer="a", count=2)
    assert [(p.reservation_id, p.user_id, p.stock_id, p.seq) for p in first] == [
        (reservation_id(group, LOST_NUMBERS_GAP + 1), 1, 1, 1),
        (reservation_id(group, LOST_NUMBERS_GAP + 2), 2, 1, 1),
    ]
    second = reservations.pending(group_id=group, consumer="b")
    assert [p.reservation_id for p in second] == [
        reservation_id(group, LOST_NUMBERS_GAP + 3)
    ]  # not a's: not idle long yet
    reservations.done(group_id=group, pending=first + second)
    assert reservations.pending(group_id=group, consumer="a", claim_idle_ms=0) == []
    assert client.xlen(GroupKeys.of(group).pending) == 0


def test_reservations_of_a_consumer_that_died_are_claimed_by_the_next(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 5})
    reservations.reserve(group_id=group, user_id=1, rand=0.0)
    (lost,) = reservations.pending(group_id=group, consumer="dead")
    assert reservations.pending(group_id=group, consumer="next", claim_idle_ms=60_000) == []
    (claimed,) = reservations.pending(group_id=group, consumer="next", claim_idle_ms=0)
    assert claimed == lost
    # A release after the claim still undoes it once: the entry is pending for the group.
    assert reservations.release(group_id=group, pending=claimed, why="the database is down")
    assert reservations.pending(group_id=group, consumer="third", claim_idle_ms=0) == []


def test_reservation_ids_are_unique_across_groups_and_name_their_group():
    ids = {reservation_id(g, n) for g in (1, 2, 2**31 - 1) for n in (1, 2, 2**30 - 1)}
    assert len(ids) == 9
    assert all(2**62 <= i < 2**63 for i in ids)
    assert {reservation_group(i) for i in ids} == {1, 2, 2**31 - 1}
    assert reservation_group(12345) is None  # an id of the database's own
    with pytest.raises(ValueError):
        reservation_id(1, 2**30)


def test_numbering_goes_on_past_what_a_redis_that_lost_its_keys_handed_out(client, group):
    """Redis keeps nothing on disk: a state rebuilt from the database must hand out no id the
    database holds, nor one that the lost Redis answered 202 with and never saw written."""
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 5}, last_reservation=reservation_id(group, 41))
    written = reservations.reserve(group_id=group, user_id=1, rand=0.0).reservation_id
    assert written > reservation_id(group, 41)
    lost = reservations.reserve(group_id=group, user_id=2, rand=0.0).reservation_id
    client.delete(*GroupKeys.of(group).all())  # the keys are lost; the database holds `written` only
    reservations.load(group_id=group, rules=open_rules(), stock={1: 4}, last_reservation=written)
    after = reservations.reserve(group_id=group, user_id=3, rand=0.0).reservation_id
    assert after == written + LOST_NUMBERS_GAP + 1 and after > lost
    # A floor below the live counter never lowers it (the state lost once its reservations
    # were persisted).
    persisted = reservations.pending(group_id=group, consumer="a")
    reservations.done(group_id=group, pending=persisted)
    client.delete(GroupKeys.of(group).state)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 3}, last_reservation=reservation_id(group, 5))
    assert reservations.reserve(group_id=group, user_id=4, rand=0.0).reservation_id == after + 1


def test_no_state_is_built_while_reservations_wait_to_be_persisted(client, group):
    """The database does not hold them yet: a state built from it would sell their units again."""
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 2})
    reservations.reserve(group_id=group, user_id=1, rand=0.0)
    client.delete(GroupKeys.of(group).state)  # the state evicted, its stream still there
    with pytest.raises(PendingReservations):
        reservations.load(group_id=group, rules=open_rules(), stock={1: 2})
    assert reservations.reserve(group_id=group, user_id=2, rand=0.0).refusal == "unavailable"
    (waiting,) = reservations.pending(group_id=group, consumer="a")
    reservations.done(group_id=group, pending=[waiting])  # persisted: the database has it
    assert reservations.load(group_id=group, rules=open_rules(), stock={1: 1}, takers={1: 1})
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).refusal == "limit"


def test_an_undone_take_frees_its_number_for_the_users_next_take(client, group):
    """A draw's number is its per-user backstop in the database: after an undone draw the
    user's next one takes the freed number, not one that is still pending or written."""
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=3, no_take=1), stock={1: 10})
    first = reservations.reserve(group_id=group, user_id=7, rand=0.99)
    second = reservations.reserve(group_id=group, user_id=7, rand=0.99)
    assert (first.seq, second.seq) == (1, 2)
    undone, kept = reservations.pending(group_id=group, consumer="a")
    assert reservations.release(group_id=group, pending=undone, why="refused")
    assert reservations.reserve(group_id=group, user_id=7, rand=0.99).seq == 1
    assert reservations.reserve(group_id=group, user_id=7, rand=0.99).seq == 3
    assert reservations.reserve(group_id=group, user_id=7, rand=0.99).refusal == "limit"


def test_a_rebuilt_state_keeps_each_users_take_numbers(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=3), stock={1: 10}, takers={7: 2}, seqs={7: [1, 3]})
    assert reservations.reserve(group_id=group, user_id=7, rand=0.0).seq == 2


def test_one_reservation_per_kick_period_asks_for_persisting_until_a_worker_rearms(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 10})
    kicks = [reservations.reserve(group_id=group, user_id=user, rand=0.0, kick_ms=60_000).kick for user in range(5)]
    assert kicks == [True, False, False, False, False]
    reservations.rearm(group_id=group)  # a worker is about to read the stream
    assert reservations.reserve(group_id=group, user_id=9, rand=0.0, kick_ms=60_000).kick
    assert kick_left_ms(client, group) > 50_000
    reservations.hold_kick(group_id=group, ms=30_000)  # a drain pacing through the stream
    assert 20_000 < kick_left_ms(client, group) <= 30_000
    assert not reservations.reserve(group_id=group, user_id=10, rand=0.0, kick_ms=60_000).kick


def kick_left_ms(client, group: int) -> int:
    """How long the group's kick flag stands yet, by Redis' clock (``live``'s fourth number)."""
    kick_at = struct.unpack_from(">dddd", client.hget(GroupKeys.of(group).state, "live"))[3]
    seconds, micros = client.time()
    return kick_at - (seconds * 1000 + micros // 1000)


def test_a_reservation_is_found_by_its_id_while_pending_once_undone_and_after(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=2), stock={1: 3})
    first = reservations.reserve(group_id=group, user_id=4, rand=0.0)
    second = reservations.reserve(group_id=group, user_id=4, rand=0.0)
    found = reservations.lookup(reservation=first.reservation_id)
    assert (found.user_id, found.stock_id, found.seq) == (4, 1, 1)
    one, two = reservations.pending(group_id=group, consumer="w")
    reservations.release(group_id=group, pending=one, why="refused: because")
    undone = reservations.lookup(reservation=first.reservation_id)
    assert (undone.user_id, undone.stock_id, undone.why) == (4, 1, "refused: because")
    assert undone.at_ms == one.at_ms
    reservations.done(group_id=group, pending=[two])
    assert reservations.lookup(reservation=second.reservation_id) == SETTLED
    assert reservations.lookup(reservation=12345) is None  # not a reservation's id
    mine = reservations.of_user(group_id=group, user_id=4)
    assert [one.reservation_id for one in mine] == [first.reservation_id]  # the undone one
    reservations.reserve(group_id=group, user_id=5, rand=0.0)
    assert [one.user_id for one in reservations.of_user(group_id=group, user_id=5)] == [5]


def test_rules_change_only_where_the_state_is_loaded(client, group):
    reservations = Reservations(client)
    assert not reservations.set_rules(group_id=group, rules=open_rules())
    assert not client.exists(GroupKeys.of(group).state)
    reservations.load(group_id=group, rules=open_rules(limit=1), stock={1: 3})
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).refusal is None
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).refusal == "limit"
    assert reservations.set_rules(group_id=group, rules=open_rules(limit=2))
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).refusal is None
    later = timezone.now() + timedelta(hours=1)
    reservations.set_rules(group_id=group, rules=open_rules(limit=5, begin_at=later, end_at=later + timedelta(hours=1)))
    assert reservations.reserve(group_id=group, user_id=1, rand=0.0).refusal == "not_started"
    assert reservations.stock(group_id=group) == {1: 1}


def test_repair_adds_relative_amounts_and_marks_take_numbers_only_where_loaded(client, group):
    reservations = Reservations(client)
    assert not reservations.repair(group_id=group, stock={1: 1}, takers={})
    reservations.load(group_id=group, rules=open_rules(limit=3), stock={1: 5}, takers={7: 2})
    assert reservations.repair(group_id=group, stock={1: -2}, takers={7: -2, 8: 1}, seqs=[(8, 1)])
    assert reservations.stock(group_id=group) == {1: 3}
    assert reservations.takers(group_id=group) == {8: 1}  # none left for 7: the field is gone
    assert reservations.reserve(group_id=group, user_id=8, rand=0.0).seq == 2  # number 1 is in use


def test_a_dropped_state_answers_unavailable_and_keeps_the_stream_and_numbering(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 5})
    reserved = reservations.reserve(group_id=group, user_id=1, rand=0.0)
    reservations.drop(group_id=group)
    assert reservations.reserve(group_id=group, user_id=2, rand=0.0).refusal == "unavailable"
    assert reservations.waiting(group_id=group) == 1
    assert reservations.lookup(reservation=reserved.reservation_id).user_id == 1
    assert reservations.claim_rebuild(group_id=group)
    assert not reservations.claim_rebuild(group_id=group)  # one ask per second, not one per buyer


def test_numbering_stays_above_the_streams_last_entry_whatever_the_database_says(client, group):
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(), stock={1: 5})
    for user in range(3):
        reservations.reserve(group_id=group, user_id=user, rand=0.0)
    reservations.done(group_id=group, pending=reservations.pending(group_id=group, consumer="w"))
    client.delete(GroupKeys.of(group).state, GroupKeys.of(group).ids)  # the counter lost, the stream kept
    assert reservations.load(group_id=group, rules=open_rules(), stock={1: 2})
    assert reservations.reserve(group_id=group, user_id=9, rand=0.0).reservation_id == reservation_id(
        group, 4 + LOST_NUMBERS_GAP
    )


def test_a_users_list_finds_their_waiting_takes_by_the_numbers_kept_beside_them(client, group):
    """Each take's reservation number is kept in the state under ``r:<user>:<take>`` while it
    waits: a list reads those, not the stream of everyone's (300 other buyers here)."""
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=3), stock={1: 400})
    for user in range(100, 400):
        reservations.reserve(group_id=group, user_id=user, rand=0.0)
    mine = [reservations.reserve(group_id=group, user_id=7, rand=0.0) for _ in range(2)]
    assert [one.reservation_id for one in reservations.of_user(group_id=group, user_id=7)] == [
        one.reservation_id for one in mine
    ]
    number = mine[1].reservation_id - reservation_id(group, 1) + 1
    assert client.hget(GroupKeys.of(group).state, taken_field(7, 2)) == str(number).encode()

    waiting = reservations.pending(group_id=group, consumer="w", count=400)
    reservations.done(group_id=group, pending=[one for one in waiting if one.user_id == 7])
    assert reservations.of_user(group_id=group, user_id=7) == []  # written: the database lists them
    assert not client.hexists(GroupKeys.of(group).state, taken_field(7, 1))  # nor kept any longer
    assert reservations.takers(group_id=group)[7] == 2  # the takes stand


def test_a_users_list_finds_their_undone_reservations_by_the_numbers_kept_for_them(client, group):
    """RELEASE keeps each user's undone numbers under ``u:<user>`` in the failed hash: a list
    reads those fields, not every undone reservation of the sale's (300 of others' here)."""
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=3), stock={1: 400})
    for user in range(100, 400):
        reservations.reserve(group_id=group, user_id=user, rand=0.0)
    mine = [reservations.reserve(group_id=group, user_id=7, rand=0.0) for _ in range(2)]
    for one in reservations.pending(group_id=group, consumer="w", count=400):
        reservations.release(group_id=group, pending=one, why="refused: test")
    numbers = [one.reservation_id - reservation_id(group, 1) + 1 for one in mine]
    assert client.hget(GroupKeys.of(group).failed, "u:7") == f"{numbers[0]} {numbers[1]} ".encode()
    assert not client.hexists(GroupKeys.of(group).state, taken_field(7, 1))  # nor kept as waiting
    # A field of 7's that the user's numbers do not name is not read: not the whole hash.
    client.hset(GroupKeys.of(group).failed, 999_999, "7:1:0:not listed")
    listed = reservations.of_user(group_id=group, user_id=7)
    assert [(one.reservation_id, one.why) for one in listed] == [(one.reservation_id, "refused: test") for one in mine]
    assert [one.user_id for one in reservations.of_user(group_id=group, user_id=150)] == [150]


def test_an_acknowledgement_leaves_a_take_field_that_names_another_reservation(client, group):
    """Between a reservation's commit and its acknowledgement, a cancel can free its take's
    number and a new take of the user's hold it: the field then names the new reservation,
    and the old one's acknowledgement leaves it, where it removed it from the user's list."""
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=3), stock={1: 5})
    first = reservations.reserve(group_id=group, user_id=7, rand=0.0)
    (written,) = reservations.pending(group_id=group, consumer="w")
    client.hset(GroupKeys.of(group).state, taken_field(7, first.seq), "999")  # the number taken again
    reservations.done(group_id=group, pending=[written])
    assert client.hget(GroupKeys.of(group).state, taken_field(7, first.seq)) == b"999"
    assert reservations.waiting(group_id=group) == 0  # acknowledged and dropped all the same
    second = reservations.reserve(group_id=group, user_id=7, rand=0.0)
    (again,) = reservations.pending(group_id=group, consumer="w")
    reservations.done(group_id=group, pending=[again])
    assert not client.hexists(GroupKeys.of(group).state, taken_field(7, second.seq))  # its own: gone


def test_an_acknowledgement_of_more_entries_than_lua_spreads_at_once_is_whole(client, group):
    """A check acknowledges every written entry of a stream in one call, 8,100 here: spread
    into one XACK, the script failed past about 8,000 ids, with the list fields already gone."""
    reservations = Reservations(client)
    reservations.load(group_id=group, rules=open_rules(limit=1), stock={1: 9000})
    for user in range(1, 8101):
        reservations.reserve(group_id=group, user_id=user, rand=0.0)
    written = reservations.pending(group_id=group, consumer="w", count=9000)
    assert len(written) == 8100
    reservations.done(group_id=group, pending=written)
    assert reservations.waiting(group_id=group) == 0
    assert not client.hexists(GroupKeys.of(group).state, taken_field(8100, 1))
