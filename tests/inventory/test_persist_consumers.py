"""redis_lua reservations persisted by several consumer processes at once, each with its
own database connection, on MariaDB: every reservation written once, the stock rows equal
to Redis, no deadlock; a consumer killed between its commit and its acknowledgement leaves
nothing to write again; an undo and a write of one reservation exclude each other."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from functools import partial

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections

from inventory.models import Stock
from inventory.redis_lua.client import Reservations
from inventory.redis_lua.consumers import consumer_leave
from inventory.redis_lua.drain import drain_group
from inventory.redis_lua.item_states import item_reservations_persist
from inventory.redis_lua.values import GroupKeys, Rules
from lottery.models import Draw
from lottery.product import POOL
from orders.models import Order
from orders.product import VOUCHER
from tests.stock import stock_left, stock_row

from ..waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]

fork = multiprocessing.get_context("fork")


@pytest.fixture
def reservations():
    client = redis.Redis.from_url(settings.REDIS_URL)
    used: list[int] = []

    class Fresh(Reservations):
        def load_from(self, item, *, limit: int) -> int:
            group_id = item.group_id
            used.append(group_id)
            client.delete(*GroupKeys.of(group_id).all())
            stock = dict(Stock.objects.filter(group_id=group_id).values_list("id", "quantity"))
            assert self.load(group_id=group_id, rules=Rules(item.begin_at, item.end_at, limit, 0), stock=stock)
            return group_id

    yield Fresh(client)
    for group_id in used:
        client.delete(*GroupKeys.of(group_id).all())
    client.close()


def new_users(count: int) -> list[int]:
    """``count`` users, in one insert."""
    model = get_user_model()
    prefix = f"consumer-{time.monotonic_ns()}"
    model.objects.bulk_create(model(username=f"{prefix}-{n}") for n in range(count))
    return list(model.objects.filter(username__startswith=prefix).values_list("pk", flat=True))


def _consume(product, item_id: int, group_id: int, name: str, start, results) -> None:
    """A consumer process: one drain of the group with a connection of its own."""
    try:
        client = Reservations(redis.Redis.from_url(settings.REDIS_URL))
        start.wait(30)

        def step(batch: int):
            return item_reservations_persist(
                product, item_id=item_id, group_id=group_id, reservations=client, consumer=name, batch=batch
            )

        handled = drain_group(group_id, step, reservations=client, batch=100, pace_seconds=0.05, stay_seconds=0)
        results.put((name, handled, ""))
    except BaseException:
        results.put((name, None, traceback.format_exc()))
    finally:
        connections.close_all()


def drain_at_once(product, item, consumers: int) -> dict[str, int]:
    """``consumers`` processes drain the item's group together; what each handled."""
    connections.close_all()  # each child opens its own, none shares the parent's socket
    start, results = fork.Barrier(consumers), fork.Queue()
    processes = [
        fork.Process(target=_consume, args=(product, item.pk, item.group_id, f"c{n}", start, results))
        for n in range(consumers)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(30)
    failures = [error for _, _, error in outcomes if error]
    assert not failures, failures[0]  # a deadlock (1213) or a lock wait timeout would show here
    return {name: handled for name, handled, _ in outcomes}


def test_three_consumer_processes_write_a_vouchers_thousands_of_reservations_once(reservations, make_voucher, settings):
    settings.RESERVATIONS_PERSIST_CONSUMERS = 4
    total = 3000
    voucher = make_voucher(stock=total)
    group = reservations.load_from(voucher, limit=1)
    made = [reservations.reserve(group_id=group, user_id=user, rand=0.5) for user in new_users(total)]
    assert all(one.refusal is None for one in made)
    handled = drain_at_once(VOUCHER, voucher, consumers=3)
    assert sum(handled.values()) == total
    assert all(handled.values()), f"a consumer wrote nothing: {handled}"  # they wrote together
    written = list(Order.objects.filter(voucher=voucher).values_list("reservation", flat=True))
    assert len(written) == total and set(written) == {one.reservation_id for one in made}
    row = Stock.objects.get(pk=stock_row(voucher))
    assert (row.quantity, row.taken) == (0, total)
    assert reservations.stock(group_id=group) == {row.pk: row.quantity}
    assert reservations.waiting(group_id=group) == 0
    print(f"\n{total} reservations of one voucher written by 3 processes: {handled}")


def test_four_consumer_processes_write_a_pools_draws_once_over_its_prizes(reservations, make_pool, settings):
    """Several stock rows, taken in any order by the batches: each batch locks them in key
    order before writing, so no two consumers deadlock."""
    settings.RESERVATIONS_PERSIST_CONSUMERS = 4
    pool = make_pool(prizes=(("Gold", 1000), ("Silver", 1000), ("Bronze", 1000)), draws_per_user=100)
    group = reservations.load_from(pool, limit=100)
    users = new_users(30)
    made = [
        reservations.reserve(group_id=group, user_id=user, rand=(n % 97) / 97) for n in range(100) for user in users
    ]
    assert all(one.refusal is None for one in made)
    handled = drain_at_once(POOL, pool, consumers=4)
    assert sum(handled.values()) == 3000 and all(handled.values()), handled
    draws = Draw.objects.filter(pool=pool)
    assert draws.count() == 3000
    assert set(draws.values_list("reservation", flat=True)) == {one.reservation_id for one in made}
    rows = {row.pk: row for row in Stock.objects.filter(group_id=group)}
    assert reservations.stock(group_id=group) == {pk: row.quantity for pk, row in rows.items()}
    for pk, row in rows.items():
        assert row.taken == draws.filter(stock_id=pk).count() == 1000 - row.quantity


def _commit_then_die(item_id: int, group_id: int, committed) -> None:
    """A consumer that commits its batch and then stops before acknowledging it."""
    client = Reservations(redis.Redis.from_url(settings.REDIS_URL))

    def stall(*, group_id, pending):
        committed.set()
        time.sleep(60)

    client.done = stall
    item_reservations_persist(VOUCHER, item_id=item_id, group_id=group_id, reservations=client, consumer="doomed")


def killed_after_its_commit(reservations, make_voucher):
    """A voucher of 50 with 40 reservations, written by a consumer killed between its commit
    and its acknowledgement; the voucher and its group."""
    voucher = make_voucher(stock=50)
    group = reservations.load_from(voucher, limit=1)
    for user in new_users(40):
        reservations.reserve(group_id=group, user_id=user, rand=0.5)
    connections.close_all()
    committed = fork.Event()
    doomed = fork.Process(target=_commit_then_die, args=(voucher.pk, group, committed))
    doomed.start()
    assert committed.wait(30), "the consumer never committed"
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(10)
    return voucher, group


def test_a_consumer_killed_between_its_commit_and_its_acknowledgement_leaves_nothing_to_write_again(
    reservations, make_voucher
):
    voucher, group = killed_after_its_commit(reservations, make_voucher)
    assert Order.objects.filter(voucher=voucher).count() == 40
    assert reservations.waiting(group_id=group) == 40  # committed, never acknowledged
    assert not consumer_leave(reservations.client, group, "doomed")  # it holds them: they stay to take over
    # The next consumer takes the dead one's entries over once idle, and only acknowledges them.
    wait_until(lambda: _idle_ms(reservations, group) >= 200, "the dead consumer's entries idle", timeout=10)
    result = item_reservations_persist(
        VOUCHER, item_id=voucher.pk, group_id=group, reservations=reservations, consumer="next", claim_idle_ms=200
    )
    assert (result.written, result.repeated, result.failed) == (0, 40, 0)
    assert Order.objects.filter(voucher=voucher).count() == 40
    assert stock_left(voucher) == 10 == reservations.stock(group_id=group)[stock_row(voucher)]
    assert reservations.waiting(group_id=group) == 0
    # Holding nothing now, the next leaves the stream's consumer group, and takes the dead one,
    # idle past the take-over's wait, with it: the group then has none.
    assert consumer_leave(reservations.client, group, "next", idle_ms=200)
    assert reservations.client.xinfo_consumers(GroupKeys.of(group).pending, "persist") == []


def test_a_check_acknowledges_what_a_killed_consumer_committed_and_sees_no_drift(reservations, make_voucher):
    """Before another consumer claims them (30 s), a killed consumer's committed entries were
    counted as pending beside their records: drift that was not, and a repair withheld their
    units until they were acknowledged. Under its exclusive lock, the check acknowledges them."""
    from inventory.redis_lua.item_states import item_reservations_check

    voucher, group = killed_after_its_commit(reservations, make_voucher)
    assert reservations.waiting(group_id=group) == 40  # committed, never acknowledged
    check = item_reservations_check(VOUCHER, item=voucher, reservations=reservations, repair=True)
    assert not check.drifted, check
    assert reservations.waiting(group_id=group) == 0
    # The check read as a consumer of its own, which left: only the dead one is left, empty.
    consumers = reservations.client.xinfo_consumers(GroupKeys.of(group).pending, "persist")
    assert [(c["name"], c["pending"]) for c in consumers] == [(b"doomed", 0)]
    assert stock_left(voucher) == 10 == reservations.stock(group_id=group)[stock_row(voucher)]


def _idle_ms(reservations, group_id: int) -> int:
    """How long ago the group's most recently handed entry was handed: one read hands its
    entries over a few milliseconds on a busy machine, and a claim takes only those idle long
    enough."""
    entries = reservations.client.xpending_range(GroupKeys.of(group_id).pending, "persist", "-", "+", 1000)
    return min((entry["time_since_delivered"] for entry in entries), default=0)


def test_an_undo_checks_again_for_a_record_another_consumer_wrote(reservations, make_voucher):
    """The database refuses the record (its reservation's key is taken: another consumer,
    handed it too, wrote it after this one looked): the undo looks again and finds it, so
    nothing is undone and the unit is not returned."""
    from inventory.redis_lua.persist import reservations_persist
    from tests.inventory.test_persist import orders_persisted, orders_write

    voucher = make_voucher(stock=5)
    group = reservations.load_from(voucher, limit=1)
    (user,) = new_users(1)
    made = reservations.reserve(group_id=group, user_id=user, rand=0.5)
    entries = reservations.pending(group_id=group, consumer="other", count=10)
    orders_write(voucher, entries)  # the other consumer's record, committed
    looks: list[int] = []

    def persisted_late(ids):  # the first look misses the other's record, as a look made before it
        looks.append(len(ids))
        return set() if len(looks) == 1 else orders_persisted(ids)

    result = reservations_persist(
        group_id=group, reservations=reservations, consumer="this", persisted=persisted_late,
        write=lambda fresh: orders_write(voucher, fresh), claim_idle_ms=0,
    )  # fmt: skip
    assert (result.written, result.repeated, result.failed) == (0, 1, 0)
    assert len(looks) == 2
    assert reservations.failed(reservation=made.reservation_id) is None
    assert reservations.stock(group_id=group)[stock_row(voucher)] == 4  # the unit stays taken
    assert Order.objects.filter(voucher=voucher).count() == 1


def test_a_reservation_undone_by_another_consumer_gets_no_record(reservations, make_voucher):
    """A consumer that read a reservation before another undid it (the other took it over
    and found the database refusing it) writes no record for it: the undo returned its unit
    already."""
    voucher = make_voucher(stock=5)
    group = reservations.load_from(voucher, limit=1)
    first, second = new_users(2)
    undone = reservations.reserve(group_id=group, user_id=first, rand=0.5)
    kept = reservations.reserve(group_id=group, user_id=second, rand=0.5)
    stale = reservations.pending(group_id=group, consumer="slow", count=10)
    assert reservations.release(group_id=group, pending=stale[0], why="refused by the database")

    class Slow(Reservations):
        def pending(self, **options):  # what it read before the undo
            return stale

    result = item_reservations_persist(
        VOUCHER, item_id=voucher.pk, group_id=group, reservations=Slow(reservations.client), consumer="slow"
    )
    assert (result.written, result.repeated) == (1, 1)  # the undone one counts as handled, unwritten
    assert list(Order.objects.filter(voucher=voucher).values_list("reservation", flat=True)) == [kept.reservation_id]
    assert undone.reservation_id not in set(Order.objects.values_list("reservation", flat=True))
    assert stock_left(voucher) == 4 == reservations.stock(group_id=group)[stock_row(voucher)]


def _drain_when_let(item_id: int, group_id: int, inside, go, results) -> None:
    """A drain process whose first batch waits, lock held, until the test lets it write."""
    client = Reservations(redis.Redis.from_url(settings.REDIS_URL))

    def step(batch: int):
        inside.set()
        go.wait(30)
        return item_reservations_persist(
            VOUCHER, item_id=item_id, group_id=group_id, reservations=client, consumer="drain", batch=batch
        )

    results.put(drain_group(group_id, step, reservations=client, pace_seconds=0.01, stay_seconds=0))
    connections.close_all()


def test_a_rebuild_waits_for_a_drain_process_and_a_drain_process_waits_for_a_rebuild(reservations, make_voucher):
    from inventory.errors import LockBusy
    from inventory.redis_lua.drain import group_lock
    from inventory.redis_lua.item_states import item_reservations_load

    voucher = make_voucher(stock=20, strategy="redis_lua")
    group = reservations.load_from(voucher, limit=1)
    for user in new_users(5):
        reservations.reserve(group_id=group, user_id=user, rand=0.5)
    connections.close_all()
    inside, go, results = fork.Event(), fork.Event(), fork.Queue()
    drain = fork.Process(target=_drain_when_let, args=(voucher.pk, group, inside, go, results))
    drain.start()
    assert inside.wait(30)
    with pytest.raises(LockBusy):  # the drain holds the lock shared, mid-batch
        item_reservations_load(VOUCHER, item=voucher, reservations=reservations, wait_seconds=0.3)
    go.set()
    assert results.get(timeout=30) == 5
    drain.join(10)
    reservations.drop(group_id=group)
    assert item_reservations_load(VOUCHER, item=voucher, reservations=reservations, wait_seconds=5)
    assert reservations.stock(group_id=group) == {stock_row(voucher): 15}  # read after the batch's commit

    rebuild = group_lock(group)
    assert rebuild.acquire()  # a rebuild under way: no drain starts
    try:
        reservations.reserve(group_id=group, user_id=new_users(1)[0], rand=0.5)
        connections.close_all()
        inside, go, results = fork.Event(), fork.Event(), fork.Queue()
        go.set()
        refused = fork.Process(target=_drain_when_let, args=(voucher.pk, group, inside, go, results))
        refused.start()
        assert results.get(timeout=30) is None
        refused.join(10)
        assert not inside.is_set()
    finally:
        rebuild.release()
    assert Order.objects.filter(voucher=voucher).count() == 5


@pytest.mark.parametrize(("consumers", "asks"), [(2, 1), (1, 0)])
def test_a_drain_at_a_full_batch_asks_once_for_another_while_fewer_than_the_limit_hold(
    reservations, make_voucher, settings, consumers, asks
):
    """A busy group gets up to RESERVATIONS_PERSIST_CONSUMERS drains, each asking for the
    next at its first full batch: one task per drain, not one per batch."""
    settings.RESERVATIONS_PERSIST_CONSUMERS = consumers
    voucher = make_voucher(stock=300)
    group = reservations.load_from(voucher, limit=1)
    for user in new_users(250):
        reservations.reserve(group_id=group, user_id=user, rand=0.5)
    asked: list[int] = []

    def step(batch: int):
        return item_reservations_persist(
            VOUCHER, item_id=voucher.pk, group_id=group, reservations=reservations, consumer="w1", batch=batch
        )

    handled = drain_group(
        group, step, reservations=reservations, batch=100, stay_seconds=0, more=lambda: asked.append(1)
    )
    assert handled == 250  # two full batches, then the rest
    assert len(asked) == asks


def test_a_staying_drain_leaves_at_its_next_pace_once_an_exclusive_caller_waits(reservations, make_voucher):
    """A crowd keeps a drain staying; a rebuild that asks for the lock is not kept waiting
    for the rest of the stay: the drain sees its flag, persists what is left and leaves."""
    import threading

    from inventory.redis_lua.drain import group_lock

    voucher = make_voucher(stock=1000)
    group = reservations.load_from(voucher, limit=1)
    buyers = iter(new_users(1000))
    reads: list[int] = []

    def step(batch: int):
        reservations.reserve(group_id=group, user_id=next(buyers), rand=0.5)  # the crowd goes on
        result = item_reservations_persist(
            VOUCHER, item_id=voucher.pk, group_id=group, reservations=reservations, consumer="w1", batch=batch
        )
        reads.append(result.handled)
        return result

    drain = threading.Thread(target=drain_group, args=(group, step), kwargs={"reservations": reservations,
                             "pace_seconds": 0.02, "stay_seconds": 60})  # fmt: skip
    drain.start()
    wait_until(lambda: len(reads) >= 3, "the drain staying")
    rebuild = group_lock(group, blocking_timeout=10)
    asked = time.monotonic()
    assert rebuild.acquire() is not None
    waited = time.monotonic() - asked
    rebuild.release()
    drain.join(10)
    assert not drain.is_alive()
    assert waited < 5, f"the rebuild waited {waited:.1f} s for a drain that had 60 s left to stay"
    assert Order.objects.filter(voucher=voucher).count() == len(reads)  # each read's one, all written


def test_a_drain_reading_full_batches_leaves_once_an_exclusive_caller_waits(reservations, make_voucher):
    """Batch after full batch, the drain never looked for a waiting release: a crowd kept the
    group's lock shared, and its buyers' cancels answered busy. It leaves at the next full batch,
    the rest left in the stream for the next drain."""
    import threading

    from inventory.redis_lua.drain import group_lock, group_share

    voucher = make_voucher(stock=2000)
    group = reservations.load_from(voucher, limit=1)
    buyers = iter(new_users(1200))
    for _ in range(100):
        reservations.reserve(group_id=group, user_id=next(buyers), rand=0.5)
    batches: list[int] = []
    waiting = threading.Event()

    def step(batch: int):
        for _ in range(batch):  # the crowd goes on: every read finds a full batch
            reservations.reserve(group_id=group, user_id=next(buyers), rand=0.5)
        result = item_reservations_persist(
            VOUCHER, item_id=voucher.pk, group_id=group, reservations=reservations, consumer="w1", batch=batch
        )
        batches.append(result.handled)
        if len(batches) == 3:
            waiting.set()
            wait_until(lambda: group_share(group).holders()[1], "the release waits for the lock")
        return result

    release = threading.Thread(
        target=lambda: (waiting.wait(10), group_lock(group, blocking_timeout=30).acquire()), daemon=True
    )
    release.start()
    handled = drain_group(group, step, reservations=reservations, batch=10, pace_seconds=0.01, stay_seconds=60)
    assert batches == [10, 10, 10] and handled == 30  # left at the first full batch after it waited
    assert reservations.waiting(group_id=group) > 0  # the rest for the next drain
    release.join(10)


class _Task:
    """What ``drain_task_run`` uses of a Celery task."""

    def __init__(self, args: tuple) -> None:
        self.request = type("Request", (), {"args": args})()
        self.sent: list[tuple] = []

    def apply_async(self, *, args, kwargs) -> None:
        self.sent.append((args, kwargs))

    def retry(self, **options):
        return RuntimeError("retried")


@pytest.mark.parametrize("helper", [False, True])
def test_a_drain_asked_for_by_a_drain_ends_without_retrying_when_it_finds_no_room(reservations, make_voucher, helper):
    from inventory.redis_lua.drain import drain_task_run, group_lock

    voucher = make_voucher(stock=5)
    group = reservations.load_from(voucher, limit=1)
    task = _Task(("voucher", voucher.pk, group))
    rebuild = group_lock(group)
    assert rebuild.acquire()
    try:
        persist = partial(item_reservations_persist, VOUCHER, item_id=voucher.pk, group_id=group)
        if helper:
            assert drain_task_run(task, group, persist, helper=True) == 0
        else:
            with pytest.raises(RuntimeError, match="retried"):
                drain_task_run(task, group, persist)
    finally:
        rebuild.release()


def test_no_drain_at_all_is_refused_at_start(settings):
    from inventory.checks import strategy_settings_check

    settings.RESERVATIONS_PERSIST_CONSUMERS = 0
    assert [error.id for error in strategy_settings_check(None)] == ["inventory.E002"]
