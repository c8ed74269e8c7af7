"""A bucketed voucher's streams persisted by several consumer processes on MariaDB: a batch
locks its bucket's rows and the rows its reservations name, not every row of the item, so
that batches of two buckets' streams write at once; a write and an undo of one reservation
still exclude each other, borrowed unit or not; and many processes on every stream write each
reservation once, the rows equal to Redis' units."""

from __future__ import annotations

import queue
import threading
import traceback
from collections import Counter
from functools import partial

import pytest
import redis
from django.conf import settings
from django.db import connection, connections

from inventory.buckets import home_bucket
from inventory.models import Stock
from inventory.redis_lua.bucket_states import busiest_state, item_states, reserve_at_home, states_load
from inventory.redis_lua.client import Reservations
from inventory.redis_lua.drain import drain_group, drain_task_run
from inventory.redis_lua.item_states import item_reservations_persist
from inventory.redis_lua.persist import Persisted, _About, _undo_unless_written, reservations_persist
from inventory.redis_lua.records_insert import RecordsInsert
from inventory.redis_lua.transfers import Transfers
from inventory.redis_lua.values import GroupKeys, Rules, reservation_group
from orders.models import Order
from orders.product import VOUCHER

from ..waiting import wait_until
from .test_persist_consumers import _Task, fork, new_users

pytestmark = pytest.mark.django_db(transaction=True)

BUCKETS = 4


@pytest.fixture
def client():
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


def bucketed(client, voucher, units: list[int]) -> tuple[list[int], list[int]]:
    """The voucher's states loaded with ``units[b]`` in bucket b's row, the database's rows
    set alike; the states and the rows, bucket by bucket."""
    rows = list(Stock.objects.filter(group_id=voucher.group_id).order_by("bucket").values_list("id", flat=True))
    assert len(rows) == BUCKETS
    for row, quantity in zip(rows, units, strict=True):
        Stock.objects.filter(pk=row).update(quantity=quantity, initial_quantity=quantity, taken=0)
    states = item_states(voucher.group_id, BUCKETS)
    for state in states:
        client.delete(*GroupKeys.of(state).all())
    rules = Rules(begin_at=voucher.begin_at, end_at=voucher.end_at, limit=1)
    states_load(Reservations(client), states, rules=rules, stock=[{row: n} for row, n in zip(rows, units, strict=True)])
    return states, rows


def forget(client, states: list[int]) -> None:
    for state in states:
        client.delete(*GroupKeys.of(state).all())


def users_at_home(count: int, bucket: int) -> list[int]:
    """``count`` users whose home is ``bucket``."""
    found: list[int] = []
    while len(found) < count:
        found += [user for user in new_users(4 * BUCKETS) if home_bucket(user, BUCKETS) == bucket]
    return found[:count]


def _write_then_wait(item_id: int, state: int, inside, go, results) -> None:
    """A consumer of ``state`` whose batch, its rows locked and its records written, waits
    for ``go`` before it commits."""
    try:
        insert = RecordsInsert(VOUCHER, item_id)

        def write(fresh) -> None:
            insert.write(fresh)
            inside.set()
            assert go.wait(60), "never let go"

        result = reservations_persist(
            group_id=state, reservations=Reservations(redis.Redis.from_url(settings.REDIS_URL)), consumer="held",
            persisted=lambda ids: set(Order.objects.filter(reservation__in=ids).values_list("reservation", flat=True)),
            write=write, prepare=insert.prepare,
        )  # fmt: skip
        results.put(("held", result.written, ""))
    except BaseException:
        results.put(("held", None, traceback.format_exc()))
    finally:
        connections.close_all()


def _persist(item_id: int, state: int, name: str, results) -> None:
    try:
        client = Reservations(redis.Redis.from_url(settings.REDIS_URL))
        result = item_reservations_persist(VOUCHER, item_id=item_id, group_id=state, reservations=client, consumer=name)
        results.put((name, result.written, ""))
    except BaseException:
        results.put((name, None, traceback.format_exc()))
    finally:
        connections.close_all()


def written_of(made) -> int:
    return Order.objects.filter(reservation__in=[one.reservation_id for one in made]).count()


def test_two_buckets_streams_commit_while_a_batch_of_another_holds_its_transaction_open(client, make_voucher):
    voucher = make_voucher(stock=40, buckets=BUCKETS)
    states, rows = bucketed(client, voucher, [10] * BUCKETS)
    reservations, transfers = Reservations(client), Transfers(client)
    made = {
        bucket: [
            reserve_at_home(reservations, transfers, states, user_id=user, rand=0.5)
            for user in users_at_home(5, bucket)
        ]
        for bucket in (1, 2)
    }
    assert all(one.refusal is None for answers in made.values() for one in answers)
    connections.close_all()  # each child opens its own
    inside, go, results = fork.Event(), fork.Event(), fork.Queue()
    held = fork.Process(target=_write_then_wait, args=(voucher.pk, states[1], inside, go, results))
    other = fork.Process(target=_persist, args=(voucher.pk, states[2], "other", results))
    held.start()
    try:
        assert inside.wait(30), "the first batch never wrote"
        other.start()
        # Were every row of the item locked by each batch, this one would wait for the held one.
        name, written, error = results.get(timeout=30)
        assert (name, written, error) == ("other", 5, "")
        assert written_of(made[2]) == 5 and written_of(made[1]) == 0  # committed beside an open batch
        assert Stock.objects.get(pk=rows[2]).quantity == 5
    finally:
        go.set()
    assert results.get(timeout=30) == ("held", 5, "")
    held.join(10)
    other.join(10)
    assert written_of(made[1]) == 5
    for bucket, state in enumerate(states):
        assert reservations.stock(group_id=state) == {rows[bucket]: Stock.objects.get(pk=rows[bucket]).quantity}
        assert reservations.waiting(group_id=state) == 0
    forget(client, states)


def _locking(connection_id: int) -> bool:
    """Whether the connection is inside a ``SELECT ... FOR UPDATE``: a statement that returns
    at once unless it waits for another transaction's locks. (InnoDB's own list of
    transactions may not show such a wait as one.)"""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s AND INFO LIKE %s",
            [connection_id, "%FOR UPDATE%"],
        )
        return bool(cursor.fetchone()[0])


def test_an_undo_of_a_borrowed_unit_waits_for_the_batch_of_its_state_that_writes_it(client, make_voucher):
    """Bucket 1 has no units: its buyer borrows one of bucket 3's row, and the reservation, in
    bucket 1's stream, names that row. A consumer writing it holds its transaction open; another,
    handed it too, finds the database refusing it and would undo it: the undo waits for the
    write's commit, finds the record, and undoes nothing."""
    voucher = make_voucher(stock=6, buckets=BUCKETS)
    states, rows = bucketed(client, voucher, [2, 0, 2, 2])
    reservations = Reservations(client)
    (user,) = users_at_home(1, 1)
    made = reserve_at_home(reservations, Transfers(client), states, user_id=user, rand=0.5)
    assert made.refusal is None and made.stock_id != rows[1]  # borrowed
    connections.close_all()
    inside, go, results = fork.Event(), fork.Event(), fork.Queue()
    held = fork.Process(target=_write_then_wait, args=(voucher.pk, states[1], inside, go, results))
    held.start()
    undone: queue.Queue = queue.Queue()
    try:
        assert inside.wait(30), "the batch never wrote"
        (entry,) = reservations.pending(group_id=states[1], consumer="other", count=10, claim_idle_ms=0)
        assert entry.stock_id == made.stock_id

        def undo() -> None:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT CONNECTION_ID()")
                    undone.put(cursor.fetchone()[0])
                persisted = lambda ids: set(  # noqa: E731
                    Order.objects.filter(reservation__in=ids).values_list("reservation", flat=True)
                )
                about = _About(states[1], "voucher", voucher.pk)
                undone.put(
                    _undo_unless_written(
                        entry, persisted, "refused", group_id=states[1], reservations=reservations, about=about
                    )
                )
            except BaseException:
                undone.put(traceback.format_exc())
            finally:
                connection.close()

        undoing = threading.Thread(target=undo)
        undoing.start()
        connection_id = undone.get(timeout=30)
        wait_until(lambda: _locking(connection_id) or not undoing.is_alive(), "the undo waiting for the batch's locks")
        assert undoing.is_alive(), undone.get(timeout=5)  # the undo ended while the batch held its rows
    finally:
        go.set()
    undoing.join(60)
    assert undone.get(timeout=5) == Persisted(repeated=1)
    assert results.get(timeout=30) == ("held", 1, "")
    held.join(10)
    assert reservations.failed(reservation=made.reservation_id) is None
    assert Order.objects.filter(reservation=made.reservation_id).count() == 1
    assert Stock.objects.get(pk=made.stock_id).quantity == 1
    forget(client, states)


def _drain(item_id: int, state: int, name: str, start, results) -> None:
    try:
        client = Reservations(redis.Redis.from_url(settings.REDIS_URL))
        start.wait(30)

        def step(batch: int):
            return item_reservations_persist(
                VOUCHER, item_id=item_id, group_id=state, reservations=client, consumer=name, batch=batch
            )

        handled = drain_group(state, step, reservations=client, batch=50, pace_seconds=0.05, stay_seconds=0)
        results.put((name, state, handled, ""))
    except BaseException:
        results.put((name, state, None, traceback.format_exc()))
    finally:
        connections.close_all()


def test_six_processes_on_four_streams_write_every_reservation_once_borrowed_units_included(
    client, make_voucher, settings
):
    settings.RESERVATIONS_PERSIST_CONSUMERS = 6
    voucher = make_voucher(stock=600, buckets=BUCKETS)
    # Buckets 2 and 3 start empty: their buyers borrow, and their streams name other buckets' rows.
    states, rows = bucketed(client, voucher, [350, 250, 0, 0])
    reservations, transfers = Reservations(client), Transfers(client)
    made = [reserve_at_home(reservations, transfers, states, user_id=user, rand=0.5) for user in new_users(700)]
    sold = [one for one in made if one.refusal is None]
    assert len(sold) == 600
    named = {bucket: {one.stock_id for one in sold if home_bucket_of(one, states) == bucket} for bucket in (2, 3)}
    assert named[2] - {rows[2]} and named[3] - {rows[3]}, "no borrowed unit"
    connections.close_all()
    spread = [*states, states[0], states[2]]
    start, results = fork.Barrier(len(spread)), fork.Queue()
    processes = [
        fork.Process(target=_drain, args=(voucher.pk, state, f"c{n}", start, results)) for n, state in enumerate(spread)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(30)
    failures = [error for *_, error in outcomes if error]
    assert not failures, failures[0]  # a deadlock (1213) or a lock wait timeout would show here
    assert sum(handled for _, _, handled, _ in outcomes) == 600
    written = list(Order.objects.filter(voucher=voucher).values_list("reservation", flat=True))
    assert len(written) == 600 and set(written) == {one.reservation_id for one in sold}
    per_row = Counter(Order.objects.filter(voucher=voucher).values_list("stock_id", flat=True))
    in_redis: Counter = Counter()
    for state in states:
        in_redis.update(reservations.stock(group_id=state))
        assert reservations.waiting(group_id=state) == 0
    for row in Stock.objects.filter(group_id=voucher.group_id):
        assert row.quantity == in_redis[row.pk] == row.initial_quantity - per_row[row.pk]
        assert row.taken == per_row[row.pk]
    forget(client, states)


def home_bucket_of(answer, states: list[int]) -> int:
    """The bucket whose stream holds a reservation (its id carries the state)."""
    return states.index(reservation_group(answer.reservation_id))


def test_a_drain_of_a_bucket_stream_asks_for_its_helper_on_the_items_busiest_stream(client, make_voucher, settings):
    """Its own stream would have the helper take turns with it on its bucket's row; the stream
    that waits the most has no drain keeping up with it."""
    settings.RESERVATIONS_PERSIST_CONSUMERS = 2
    voucher = make_voucher(stock=1200, buckets=BUCKETS)
    states, _ = bucketed(client, voucher, [300, 600, 0, 300])
    reservations = Reservations(client)
    share = {0: 100, 1: 520, 3: 300}
    users = iter(new_users(sum(share.values())))
    for bucket, count in share.items():
        for _ in range(count):
            reserved = reservations.reserve(group_id=states[bucket], user_id=next(users), rand=0.5, states=BUCKETS)
            assert reserved.refusal is None
    assert busiest_state(reservations, states[0]) == states[1]
    task = _Task(("voucher", voucher.pk, states[1]))
    persist = partial(item_reservations_persist, VOUCHER, item_id=voucher.pk, group_id=states[1])
    assert drain_task_run(task, states[1], persist) == 520  # a full batch of 500, then the rest
    assert task.sent == [(("voucher", voucher.pk, states[3]), {"helper": True})]
    assert [reservations.waiting(group_id=state) for state in states] == [100, 0, 0, 300]
    assert busiest_state(reservations, states[2]) == states[3]
    reservations.client.delete(GroupKeys.of(states[3]).pending, GroupKeys.of(states[0]).pending)
    assert busiest_state(reservations, states[2]) == states[2]  # none waits: its own
    forget(client, states)
