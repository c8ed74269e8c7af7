"""redis_lua reservations persisted to MariaDB: once each, with the stock, undone when the
database refuses them for good, never lost to a consumer that died."""

from __future__ import annotations

import time
from functools import partial

import pytest
import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError

from inventory.models import Stock
from inventory.redis_lua.client import Reservations
from inventory.redis_lua.item_states import item_reservations_check, item_reservations_load, item_reservations_persist
from inventory.redis_lua.persist import reservations_persist
from inventory.redis_lua.values import LOST_NUMBERS_GAP, GroupKeys, Rules, reservation_id
from lottery.models import Draw
from lottery.product import POOL
from orders.models import Order
from orders.product import VOUCHER
from tests.stock import stock_left, stock_row

from ..waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reservations():
    client = redis.Redis.from_url(settings.REDIS_URL)
    used: list[int] = []

    class Fresh(Reservations):
        def load_from(self, item, *, limit: int, no_take: int = 0):
            """The item's state, as the database has it (its group's keys cleared first)."""
            group_id = item.group_id
            used.append(group_id)
            client.delete(*GroupKeys.of(group_id).all())
            stock = dict(Stock.objects.filter(group_id=group_id).values_list("id", "quantity"))
            rules = Rules(begin_at=item.begin_at, end_at=item.end_at, limit=limit, no_take=no_take)
            assert self.load(group_id=group_id, rules=rules, stock=stock)
            return group_id

    yield Fresh(client)
    for group_id in used:
        client.delete(*GroupKeys.of(group_id).all())
    client.close()


def test_reservations_become_orders_once_with_the_stock(reservations, make_voucher, make_user):
    voucher = make_voucher(stock=5, strategy="db_atomic")
    group = reservations.load_from(voucher, limit=1)
    users = [make_user() for _ in range(3)]
    answers = [reservations.reserve(group_id=group, user_id=u.pk, rand=0.5) for u in users]
    result = item_reservations_persist(
        VOUCHER, item_id=voucher.pk, group_id=voucher.group_id, reservations=reservations, consumer="w1"
    )
    assert (result.written, result.repeated, result.failed) == (3, 0, 0)
    orders = Order.objects.filter(voucher=voucher)
    assert sorted(orders.values_list("reservation", flat=True)) == sorted(a.reservation_id for a in answers)
    assert set(orders.values_list("status", flat=True)) == {Order.Status.CONFIRMED}
    assert set(orders.values_list("buyer_guard", flat=True)) == {u.pk for u in users}
    assert stock_left(voucher) == 2 == reservations.stock(group_id=group)[stock_row(voucher)]
    assert (
        item_reservations_persist(
            VOUCHER, item_id=voucher.pk, group_id=voucher.group_id, reservations=reservations, consumer="w1"
        ).handled
        == 0
    )


def test_a_consumer_that_died_after_its_commit_leaves_no_second_order(reservations, make_voucher, make_user):
    """The worst moment: the rows are committed, the acknowledgement never sent. The next
    consumer takes the entries over and only acknowledges them."""
    voucher = make_voucher(stock=5, strategy="db_atomic")
    group = reservations.load_from(voucher, limit=1)
    for _ in range(2):
        reservations.reserve(group_id=group, user_id=make_user().pk, rand=0.5)

    class Died(Exception):
        pass

    def die_before_ack(*, group_id, pending):
        raise Died()

    dying = Reservations(reservations.client)
    dying.done = die_before_ack
    with pytest.raises(Died):
        item_reservations_persist(
            VOUCHER, item_id=voucher.pk, group_id=voucher.group_id, reservations=dying, consumer="dead"
        )
    assert Order.objects.filter(voucher=voucher).count() == 2
    result = item_reservations_persist(
        VOUCHER,
        item_id=voucher.pk,
        group_id=voucher.group_id,
        reservations=reservations,
        consumer="next",
        claim_idle_ms=0,
    )
    assert (result.written, result.repeated) == (0, 2)
    assert Order.objects.filter(voucher=voucher).count() == 2
    assert stock_left(voucher) == 3  # taken once
    assert reservations.client.xlen(GroupKeys.of(group).pending) == 0


def test_a_reservation_the_database_refuses_is_undone_and_the_rest_of_its_batch_is_written(
    reservations, make_voucher, make_user
):
    """A buyer who already has an order (bought before the switch to redis_lua, and Redis
    was loaded without it): the one-per-user key refuses the second order."""
    voucher = make_voucher(stock=5, strategy="db_atomic")
    early = make_user()
    Order.objects.create(user=early, voucher=voucher, stock_id=stock_row(voucher), buyer_guard=early.pk)
    Stock.objects.filter(pk=stock_row(voucher)).update(quantity=4)
    group = reservations.load_from(voucher, limit=1)
    others = [make_user() for _ in range(2)]
    refused = reservations.reserve(group_id=group, user_id=early.pk, rand=0.5)
    for user in others:
        reservations.reserve(group_id=group, user_id=user.pk, rand=0.5)
    result = item_reservations_persist(
        VOUCHER, item_id=voucher.pk, group_id=voucher.group_id, reservations=reservations, consumer="w1"
    )
    assert (result.written, result.failed) == (2, 1)
    assert Order.objects.filter(voucher=voucher).count() == 3
    assert "refused" in reservations.failed(reservation=refused.reservation_id).why
    assert stock_left(voucher) == 2 == reservations.stock(group_id=group)[stock_row(voucher)]
    assert early.pk not in reservations.takers(group_id=group)


def test_each_reservation_is_logged_with_the_id_of_the_request_that_made_it(
    reservations, make_voucher, make_user, caplog
):
    """One batch holds many requests' reservations: each gets a line of its own, carrying
    the request id kept in its stream entry, whether written, already written or undone."""
    voucher = make_voucher(stock=5, strategy="db_atomic")
    early = make_user()
    Order.objects.create(user=early, voucher=voucher, stock_id=stock_row(voucher), buyer_guard=early.pk)
    Stock.objects.filter(pk=stock_row(voucher)).update(quantity=4)
    group = reservations.load_from(voucher, limit=1)
    refused = reservations.reserve(group_id=group, user_id=early.pk, rand=0.5, request_id="rid-early")
    buyers = [make_user() for _ in range(3)]
    made = [
        reservations.reserve(group_id=group, user_id=user.pk, rand=0.5, request_id=f"rid-{n}")
        for n, user in enumerate(buyers)
    ]
    # The last one's row is there already (a consumer that died before acknowledging).
    Order.objects.create(
        user=buyers[2],
        voucher=voucher,
        stock_id=made[2].stock_id,
        buyer_guard=buyers[2].pk,
        reservation=made[2].reservation_id,
    )
    caplog.set_level("INFO", logger="inventory.redis_lua.persist")
    item_reservations_persist(
        VOUCHER, item_id=voucher.pk, group_id=voucher.group_id, reservations=reservations, consumer="w1"
    )
    lines = {r.reservation_id: r for r in caplog.records if getattr(r, "event", "") == "reservation"}
    assert {n: (r.request_id, r.outcome, r.levelname) for n, r in lines.items()} == {
        refused.reservation_id: ("rid-early", "failed", "WARNING"),
        made[0].reservation_id: ("rid-0", "written", "INFO"),
        made[1].reservation_id: ("rid-1", "written", "INFO"),
        made[2].reservation_id: ("rid-2", "repeated", "INFO"),
    }
    assert "refused" in lines[refused.reservation_id].why
    line = lines[made[0].reservation_id]
    assert (line.kind, line.item_id, line.user_id, line.stock_id) == (
        "voucher",
        voucher.pk,
        buyers[0].pk,
        stock_row(voucher),
    )
    assert line.waited_ms >= 0
    (batch,) = [r for r in caplog.records if getattr(r, "event", "") == "reservations.batch"]
    assert (batch.written, batch.repeated, batch.failed) == (2, 1, 1)


def test_draws_are_written_with_their_prize_and_the_users_count(reservations, make_pool, make_user):
    pool = make_pool(prizes=(("Gold", 1), ("Silver", 2)), no_prize_weight=0, draws_per_user=2)
    gold, silver = pool.prizes.all()
    group = reservations.load_from(pool, limit=2)
    alice, bob = make_user(), make_user()
    answers = [
        reservations.reserve(group_id=group, user_id=alice.pk, rand=0.0),  # Gold (1 of 3)
        reservations.reserve(group_id=group, user_id=alice.pk, rand=0.0),  # Silver: Gold is gone
        reservations.reserve(group_id=group, user_id=bob.pk, rand=0.99),
    ]
    assert [a.stock_id for a in answers] == [gold.stock_id, silver.stock_id, silver.stock_id]
    result = item_reservations_persist(
        POOL, item_id=pool.pk, group_id=pool.group_id, reservations=reservations, consumer="w1"
    )
    assert result.written == 3
    rows = list(Draw.objects.filter(pool=pool).order_by("reservation").values_list("user_id", "prize_id", "seq"))
    assert rows == [(alice.pk, gold.pk, 1), (alice.pk, silver.pk, 2), (bob.pk, silver.pk, 1)]
    assert dict(Stock.objects.filter(group_id=group).values_list("id", "quantity")) == {
        gold.stock_id: 0,
        silver.stock_id: 0,
    }


def test_while_the_database_is_unreachable_nothing_is_acknowledged_and_old_reservations_are_undone(
    reservations, make_voucher, make_user
):
    voucher = make_voucher(stock=5, strategy="db_atomic")
    group = reservations.load_from(voucher, limit=1)
    reserved = reservations.reserve(group_id=group, user_id=make_user().pk, rand=0.5)

    def unreachable(ids):
        raise OperationalError(2003, "Can't connect to MySQL server on '127.0.0.1'")

    def persist(**options):
        return reservations_persist(
            group_id=group, reservations=reservations, consumer="w1", persisted=unreachable, write=None, **options
        )

    with pytest.raises(OperationalError):
        persist(give_up_seconds=300)
    assert reservations.failed(reservation=reserved.reservation_id) is None  # still pending
    with pytest.raises(OperationalError):
        persist(claim_idle_ms=0, give_up_seconds=0)
    assert reservations.failed(reservation=reserved.reservation_id).why == "the database was unreachable for too long"
    assert reservations.stock(group_id=group)[stock_row(voucher)] == 5
    assert Order.objects.filter(voucher=voucher).count() == 0


def test_a_batch_the_database_was_unreachable_for_is_taken_over_at_once_once_it_answers(
    reservations, make_voucher, make_user
):
    # A drain whose database went away (a restart) leaves its batch unacknowledged; the
    # retried drain, in this process or another worker's, writes it as soon as the database
    # answers, not RESERVATIONS_CLAIM_IDLE_MS (30 s) later as a dead consumer's batch.
    voucher = make_voucher(stock=5, strategy="db_atomic")
    group = reservations.load_from(voucher, limit=1)
    reserved = [reservations.reserve(group_id=group, user_id=make_user().pk, rand=0.5) for _ in range(2)]

    def unreachable(ids):
        raise OperationalError(2013, "Lost connection to server during query")

    with pytest.raises(OperationalError):
        reservations_persist(
            group_id=group, reservations=reservations, consumer="w1", persisted=unreachable, write=None
        )

    result = item_reservations_persist(
        VOUCHER, item_id=voucher.pk, group_id=group, reservations=reservations, consumer="w2", claim_idle_ms=30_000
    )
    assert (result.written, result.repeated, result.failed) == (2, 0, 0)
    orders = Order.objects.filter(voucher=voucher)
    assert sorted(orders.values_list("reservation", flat=True)) == sorted(r.reservation_id for r in reserved)
    assert reservations.waiting(group_id=group) == 0


def test_a_voucher_is_loaded_from_the_database_with_its_buyers_and_numbering(reservations, make_voucher, make_user):

    voucher = make_voucher(stock=5, strategy="redis_lua")
    early, late = make_user(), make_user()
    Order.objects.create(user=early, voucher=voucher, stock_id=stock_row(voucher), buyer_guard=early.pk)
    Order.objects.create(
        user=late,
        voucher=voucher,
        stock_id=stock_row(voucher),
        buyer_guard=late.pk,
        reservation=reservation_id(voucher.group_id, 7),
    )
    Stock.objects.filter(pk=stock_row(voucher)).update(quantity=3)
    group = voucher.group_id
    reservations.client.delete(*GroupKeys.of(group).all())
    assert item_reservations_load(VOUCHER, item=voucher, reservations=reservations)
    assert not item_reservations_load(VOUCHER, item=voucher, reservations=reservations)  # never over live state
    assert reservations.stock(group_id=group) == {stock_row(voucher): 3}
    assert reservations.takers(group_id=group) == {early.pk: 1, late.pk: 1}
    assert reservations.reserve(group_id=group, user_id=early.pk, rand=0.5).refusal == "limit"
    next_one = reservations.reserve(group_id=group, user_id=make_user().pk, rand=0.5)
    # Numbering goes on above whatever the lost keys had counted: past the database's last
    # number (7) and past where the counter lost before started (its creation's load, at
    # LOST_NUMBERS_GAP, above which it may have handed out ids the database never saw).
    assert next_one.reservation_id == reservation_id(group, 2 * LOST_NUMBERS_GAP + 1)
    reservations.client.delete(*GroupKeys.of(group).all())


def test_a_pool_is_loaded_with_its_rules_prizes_and_each_users_draws(reservations, make_pool, make_user):

    pool = make_pool(prizes=(("Gold", 1), ("Silver", 4)), no_prize_weight=5, draws_per_user=2, strategy="redis_lua")
    gold, silver = pool.prizes.all()
    alice = make_user()
    Draw.objects.create(user=alice, pool=pool, prize=silver, stock_id=silver.stock_id, seq=1, user_guard=alice.pk)
    Stock.objects.filter(pk=silver.stock_id).update(quantity=3)
    reservations.client.delete(*GroupKeys.of(pool.group_id).all())
    assert item_reservations_load(POOL, item=pool, reservations=reservations)
    assert reservations.stock(group_id=pool.group_id) == {gold.stock_id: 1, silver.stock_id: 3}
    assert reservations.takers(group_id=pool.group_id) == {alice.pk: 1}
    second = reservations.reserve(group_id=pool.group_id, user_id=alice.pk, rand=0.99)  # "no prize": 5 of 9
    assert (second.refusal, second.stock_id, second.seq) == (None, None, 2)
    assert reservations.reserve(group_id=pool.group_id, user_id=alice.pk, rand=0.0).refusal == "limit"
    reservations.client.delete(*GroupKeys.of(pool.group_id).all())


def test_a_rebuild_waits_for_the_batches_being_persisted_and_drains_wait_for_a_rebuild(reservations, make_voucher):
    """The rebuild reads the database's stock: it takes the group's lock exclusive, which
    drains hold shared while they write, so it never reads the stock between a batch's rows
    and its decrement's commit; and no drain starts while it holds it."""
    from inventory.errors import LockBusy
    from inventory.redis_lua.drain import drain_group, group_lock, group_share

    voucher = make_voucher(stock=5, strategy="redis_lua")
    group = voucher.group_id
    reservations.client.delete(*GroupKeys.of(group).all())
    drainer = group_share(group)
    assert drainer.acquire() is not None  # a drain under way
    try:
        with pytest.raises(LockBusy):
            item_reservations_load(VOUCHER, item=voucher, reservations=reservations, wait_seconds=0.3)
        assert not reservations.client.exists(GroupKeys.of(group).state)
    finally:
        drainer.release()
    rebuild = group_lock(group)
    assert rebuild.acquire() is not None  # a rebuild under way
    try:
        second = drain_group(
            group, lambda batch: pytest.fail("a drain ran during a rebuild"), reservations=reservations
        )
        assert second is None
    finally:
        rebuild.release()
    assert item_reservations_load(VOUCHER, item=voucher, reservations=reservations, wait_seconds=0.3)
    reservations.client.delete(*GroupKeys.of(group).all())


def test_only_a_database_out_of_reach_counts_as_unreachable():
    """A deadlock or a lock wait is retried, never a reason to undo a reservation."""
    from core.outage import database_unreachable as unreachable

    assert unreachable(OperationalError(2006, "MySQL server has gone away"))
    assert unreachable(OperationalError(2013, "Lost connection to MySQL server during query"))
    assert unreachable(InterfaceError(0, ""))
    try:  # as Django wraps the driver's error: the cause is what says so
        raise OperationalError("wrapped") from OperationalError(2003, "Can't connect to MySQL server")
    except OperationalError as wrapped:
        assert unreachable(wrapped)
    assert not unreachable(OperationalError(1213, "Deadlock found when trying to get lock"))
    assert not unreachable(OperationalError(1205, "Lock wait timeout exceeded"))
    assert not unreachable(OperationalError("database is locked"))  # SQLite, busy


def test_reconcile_counts_waiting_reservations_and_reports_drift(reservations, make_voucher, make_user, capsys):
    """Redis stock + units pending == the database's stock, Redis takes == records + takes
    pending: while reservations wait that is no drift; a unit lost in Redis is."""
    import json

    from django.core.management import call_command

    voucher = make_voucher(stock=5)
    group = reservations.load_from(voucher, limit=1)
    buyer = make_user()
    reservations.reserve(group_id=group, user_id=buyer.pk, rand=0.5)
    check = item_reservations_check(VOUCHER, item=voucher, reservations=reservations)
    assert (check.state, check.drifted, check.pending) == (True, False, 1)
    item_reservations_persist(
        VOUCHER, item_id=voucher.pk, group_id=voucher.group_id, reservations=reservations, consumer="w1"
    )
    assert not item_reservations_check(VOUCHER, item=voucher, reservations=reservations).drifted

    reservations.add_units(group_id=group, stock_id=stock_row(voucher), units=-1)  # a unit lost in Redis
    reservations.client.hdel(GroupKeys.of(group).state, buyer.pk)  # and a buyer forgotten
    check = item_reservations_check(VOUCHER, item=voucher, reservations=reservations)
    assert check.stock == {stock_row(voucher): (3, 4)}
    assert check.takers == {buyer.pk: (0, 1)}
    with pytest.raises(SystemExit) as exit_:
        call_command("reconcile", "--json")
    assert exit_.value.code == 1
    document = json.loads(capsys.readouterr().out)
    (item,) = [item for item in document["items"] if item["kind"] == "voucher" and item["id"] == voucher.pk]
    assert item["drifted"] and not document["ok"]
    # --repair sets it right (and exits 0), and rebuilds a redis_lua item's missing state.
    call_command("reconcile", "--repair")
    assert "REPAIRED" in capsys.readouterr().out
    assert not item_reservations_check(VOUCHER, item=voucher, reservations=reservations).drifted
    assert reservations.takers(group_id=group) == {buyer.pk: 1}


def test_reconcile_repair_rebuilds_a_missing_state_of_a_redis_lua_voucher(reservations, make_voucher, capsys):
    from django.core.management import call_command

    voucher = make_voucher(stock=4, strategy="redis_lua")
    group = voucher.group_id
    reservations.client.delete(*GroupKeys.of(group).all())
    with pytest.raises(SystemExit) as exit_:
        call_command("reconcile")
    assert exit_.value.code == 1
    assert "answering 503 until rebuilt" in capsys.readouterr().out
    call_command("reconcile", "--repair")
    assert "rebuilt from the database" in capsys.readouterr().out
    assert reservations.stock(group_id=group) == {stock_row(voucher): 4}
    reservations.client.delete(*GroupKeys.of(group).all())


def test_a_drain_stays_while_reservations_arrive_and_no_request_asks_for_another(reservations, make_voucher, make_user):
    """While the drain paces through a crowd, the kick flag is held: the requests send no
    task of their own, and each read takes what arrived in a pace. Once it leaves, the
    next reservation asks again.

    Each read waits for the test to let it through, after a wave of reservations: what
    arrives within a pace is the test's to say, not the scheduler's."""
    import threading

    from inventory.redis_lua.drain import drain_group

    voucher = make_voucher(stock=100, strategy="db_atomic")
    group = reservations.load_from(voucher, limit=1)
    buyers = [make_user().pk for _ in range(12)]
    reservations.reserve(group_id=group, user_id=buyers[0], rand=0.5)
    reads: list[int] = []
    let_read = threading.Semaphore(0)

    def step(batch: int):
        assert let_read.acquire(timeout=10), "the test never let the drain read"
        result = item_reservations_persist(
            VOUCHER, item_id=voucher.pk, group_id=group, reservations=reservations, consumer="w1", batch=batch
        )
        reads.append(result.handled)
        return result

    drain = threading.Thread(target=drain_group, args=(group, step), kwargs={"reservations": reservations,
                             "pace_seconds": 0.1, "stay_seconds": 60})  # fmt: skip
    drain.start()
    kicks = []
    # Three waves of three, each while the drain waits to read; then two empty reads: the
    # one that makes it leave, and the last after it cleared the flag.
    for number, wave in enumerate([buyers[1:4], buyers[4:7], buyers[7:10], [], []], start=1):
        kicks += [reservations.reserve(group_id=group, user_id=user, rand=0.5).kick for user in wave]
        let_read.release()
        wait_until(lambda number=number: len(reads) == number, f"the drain's read {number}")
    drain.join(10)
    assert not drain.is_alive()
    assert not any(kicks)  # the drain was there: nobody sent a task
    assert reads == [4, 3, 3, 0, 0]  # read in paces, a wave at a time, not one by one
    assert Order.objects.filter(voucher=voucher).count() == 10
    assert reservations.reserve(group_id=group, user_id=buyers[10], rand=0.5).kick  # gone: ask again


def test_the_drain_reads_at_the_pace_of_reservations_kick_ms(reservations, make_voucher, make_user, settings):
    """The drain stays while reservations arrive, reading once per RESERVATIONS_KICK_MS:
    the pace at which a crowd asks for drains when no drain is there."""
    from inventory.redis_lua.drain import drain_group

    settings.RESERVATIONS_KICK_MS = 300
    voucher = make_voucher(stock=10, strategy="db_atomic")
    group = reservations.load_from(voucher, limit=1)
    first, second = make_user().pk, make_user().pk
    reservations.reserve(group_id=group, user_id=first, rand=0.5)
    reads: list[tuple[float, int]] = []

    def step(batch: int):
        result = item_reservations_persist(
            VOUCHER, item_id=voucher.pk, group_id=group, reservations=reservations, consumer="w1", batch=batch
        )
        reads.append((time.monotonic(), result.handled))
        if len(reads) == 1:  # one more arrives within the pace: the drain stays for it
            reservations.reserve(group_id=group, user_id=second, rand=0.5)
        return result

    assert drain_group(group, step, reservations=reservations, stay_seconds=60) == 2
    assert [handled for _, handled in reads] == [1, 1, 0, 0]  # then leaves, and reads once more
    assert reads[1][0] - reads[0][0] >= 0.3


def early_buyer_voucher(reservations, make_voucher, make_user, *, stock: int):
    """A voucher loaded into Redis without the order its early buyer already has: a
    reservation of that buyer is refused by the database's one-per-user key."""
    voucher = make_voucher(stock=stock, strategy="db_atomic")
    early = make_user()
    Order.objects.create(user=early, voucher=voucher, stock_id=stock_row(voucher), buyer_guard=early.pk)
    Stock.objects.filter(pk=stock_row(voucher)).update(quantity=stock - 1)
    return voucher, reservations.load_from(voucher, limit=1), early


def orders_persisted(ids: list[int]) -> set[int]:
    return set(Order.objects.filter(reservation__in=ids).values_list("reservation", flat=True))


def orders_write(voucher, fresh) -> None:
    Order.objects.bulk_create(
        Order(
            user_id=one.user_id,
            voucher=voucher,
            stock_id=one.stock_id,
            buyer_guard=one.user_id,
            reservation=one.reservation_id,
        )
        for one in fresh
    )


def test_a_refused_reservation_is_found_by_halving_its_batch_not_by_writing_one_at_a_time(
    reservations, make_voucher, make_user
):
    """One refused reservation among 64: the other 63 are written in 15 transactions (each
    half apart, down to a small part written one at a time), not 65."""
    voucher, group, early = early_buyer_voucher(reservations, make_voucher, make_user, stock=100)
    buyers = [make_user() for _ in range(63)]
    made = [reservations.reserve(group_id=group, user_id=user.pk, rand=0.5) for user in buyers[:40]]
    refused = reservations.reserve(group_id=group, user_id=early.pk, rand=0.5)
    made += [reservations.reserve(group_id=group, user_id=user.pk, rand=0.5) for user in buyers[40:]]
    writes: list[int] = []

    def write(fresh) -> None:
        writes.append(len(fresh))
        orders_write(voucher, fresh)

    result = reservations_persist(
        group_id=group, reservations=reservations, consumer="w1", persisted=orders_persisted, write=write
    )
    assert (result.written, result.repeated, result.failed) == (63, 0, 1)
    assert writes[0] == 64
    # The batch, its halves, their halves down to a part of fewer than WRITTEN_ALONE_BELOW
    # (16), then that part one at a time: 1 + 2 + 2 + 2 + 8 = 15, where one each made 65.
    assert len(writes) <= 16
    assert sorted(
        Order.objects.filter(voucher=voucher, reservation__isnull=False).values_list("reservation", flat=True)
    ) == sorted(one.reservation_id for one in made)
    assert "refused" in reservations.failed(reservation=refused.reservation_id).why
    assert stock_left(voucher) == 99 - 63 == reservations.stock(group_id=group)[stock_row(voucher)]
    assert reservations.client.xlen(GroupKeys.of(group).pending) == 0


def test_when_every_reservation_of_a_batch_is_refused_each_is_undone(reservations, make_voucher, make_user):
    """Users gone from the database since they reserved: all 20 refused, all undone, the stock
    and the takes back, and the halving stops where writing one at a time costs less."""
    voucher = make_voucher(stock=50, strategy="db_atomic")
    group = reservations.load_from(voucher, limit=1)
    gone = [make_user() for _ in range(20)]
    made = [reservations.reserve(group_id=group, user_id=user.pk, rand=0.5) for user in gone]
    type(gone[0]).objects.filter(pk__in=[user.pk for user in gone]).delete()
    result = item_reservations_persist(
        VOUCHER, item_id=voucher.pk, group_id=voucher.group_id, reservations=reservations, consumer="w1"
    )
    assert (result.written, result.repeated, result.failed) == (0, 0, 20)
    assert all("refused" in reservations.failed(reservation=one.reservation_id).why for one in made)
    assert reservations.stock(group_id=group)[stock_row(voucher)] == 50
    assert reservations.takers(group_id=group) == {}
    assert not Order.objects.filter(voucher=voucher).exists()


def test_a_part_written_before_the_database_went_away_is_never_undone(reservations, make_voucher, make_user):
    """A refused reservation splits the batch; the first half commits, then the database
    is out of reach: past the give-up time only the reservations without a record are
    undone, and the next drain acknowledges the written ones as repeated."""
    voucher, group, early = early_buyer_voucher(reservations, make_voucher, make_user, stock=100)
    buyers = [make_user() for _ in range(31)]
    first = [reservations.reserve(group_id=group, user_id=user.pk, rand=0.5) for user in buyers[:16]]
    refused = reservations.reserve(group_id=group, user_id=early.pk, rand=0.5)
    last = [reservations.reserve(group_id=group, user_id=user.pk, rand=0.5) for user in buyers[16:]]
    calls: list[int] = []

    def persisted(ids: list[int]) -> set[int]:
        calls.append(len(ids))
        if len(calls) == 3:  # the whole batch, its first half, then the second half
            raise OperationalError(2013, "Lost connection to MySQL server during query")
        return orders_persisted(ids)

    with pytest.raises(OperationalError):
        reservations_persist(
            group_id=group, reservations=reservations, consumer="w1", persisted=persisted,
            write=partial(orders_write, voucher),
            claim_idle_ms=0, give_up_seconds=0,
        )  # fmt: skip
    assert calls == [32, 16, 16]
    written = set(
        Order.objects.filter(voucher=voucher, reservation__isnull=False).values_list("reservation", flat=True)
    )
    assert written == {one.reservation_id for one in first}
    assert all(reservations.failed(reservation=one.reservation_id) is None for one in first)
    assert all(reservations.failed(reservation=one.reservation_id) for one in [refused, *last])
    # Redis gave back the units and takes of the undone ones only.
    assert reservations.stock(group_id=group)[stock_row(voucher)] == 99 - 16
    assert set(reservations.takers(group_id=group)) == {user.pk for user in buyers[:16]}
    result = item_reservations_persist(
        VOUCHER, item_id=voucher.pk, group_id=group, reservations=reservations, consumer="w2", claim_idle_ms=0
    )
    assert (result.written, result.repeated, result.failed) == (0, 16, 0)
    assert reservations.client.xlen(GroupKeys.of(group).pending) == 0
