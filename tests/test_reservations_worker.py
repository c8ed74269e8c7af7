"""redis_lua persistence by a real Celery worker process: every reservation becomes one
order or draw, also when the worker is SIGKILLed in the middle of a batch."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import redis
from celery import Celery
from django.conf import settings

from accounts.services import users_with_tokens_create
from core.namespace import instance_key
from inventory.models import Stock
from inventory.records import internal_of, public_of
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.values import GroupKeys, Rules
from inventory.tasks import reservations_drain
from lottery.models import Draw
from orders.models import Order
from tests.live import database_url, instance_keys_emptied
from tests.stock import stock_left, stock_row

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]

ROOT = Path(__file__).resolve().parent.parent
# The test's own broker, so that no other test's message reaches this worker.
BROKER = "redis://127.0.0.1:6379/7"


class Worker:
    """A Celery worker process (or, with ``beat``, the beat) on the test database, started
    and killed at will. ``env`` overrides its environment."""

    def __init__(
        self, broker: str = BROKER, *, beat: bool = False, concurrency: int = 1, log: Path | None = None, **env: str
    ) -> None:
        self.process: subprocess.Popen | None = None
        self.broker = broker
        self.beat = beat
        self.concurrency = concurrency
        self.log = log
        self.env = env

    def start(self) -> None:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "RESERVATIONS_REDIS_URL": settings.RESERVATIONS_REDIS_URL,
            "CELERY_BROKER_URL": self.broker,
            # Take a dead worker's reservations over after 2 s rather than 30.
            "RESERVATIONS_CLAIM_IDLE_MS": "2000",
            "PYTHONPATH": str(ROOT),
            **self.env,
        }
        if self.beat:
            schedule = Path(tempfile.mkdtemp()) / "beat-schedule"
            command = ["beat", "--schedule", str(schedule)]
        else:
            command = ["worker", "--concurrency", str(self.concurrency),
                       "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
        output = None
        if self.log is not None:  # its tasks' lines too (each ran task's answer)
            env["CELERY_LOG_LEVEL"] = "INFO"
            output = self.log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "--quiet", *command],
            cwd=ROOT, env=env, start_new_session=True, stdout=output, stderr=output,
        )  # fmt: skip
        if output is not None:
            output.close()  # the worker's own copy stays open

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def worker():
    instance_keys_emptied(BROKER)
    worker = Worker()
    worker.start()
    yield worker
    worker.stop()


def send(task, *args) -> None:
    """Send ``task`` to the test's own broker, as the web process would to its own."""
    # Not the current app: the services' tasks must keep sending to their own broker.
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS  # the instance's namespace, as the worker's
    with Celery(broker=BROKER, broker_transport_options=options, set_as_current=False) as sender:
        sender.send_task(task.name, args=args)


@pytest.fixture
def reservations():
    client = reservations_client()
    used: list[int] = []
    yield client, used
    for group_id in used:
        client.client.delete(*GroupKeys.of(group_id).all())


def load(reservations, item, stock: dict[int, int], *, limit: int, no_take: int = 0) -> int:
    client, used = reservations
    group_id = item.group_id
    used.append(group_id)
    client.client.delete(*GroupKeys.of(group_id).all())
    client.load(group_id=group_id, rules=Rules(item.begin_at, item.end_at, limit, no_take), stock=stock)
    return group_id


def wait_for(predicate, timeout: float = 60) -> None:
    give_up = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < give_up, "timed out"
        time.sleep(0.2)


def users(count: int) -> list[int]:
    from django.contrib.auth import get_user_model

    names = [name for name, _ in users_with_tokens_create(count=count, prefix="res")]
    return list(get_user_model().objects.filter(username__in=names).values_list("pk", flat=True))


def test_a_worker_persists_every_reservation_of_a_voucher_once(worker, reservations, make_voucher):
    voucher = make_voucher(stock=300)
    group = load(reservations, voucher, {stock_row(voucher): 300}, limit=1)
    reserved = [reservations[0].reserve(group_id=group, user_id=u, rand=0.5) for u in users(300)]
    send(reservations_drain, "voucher", voucher.pk, voucher.group_id)
    wait_for(lambda: Order.objects.filter(voucher=voucher).count() == 300)
    rows = set(Order.objects.filter(voucher=voucher).values_list("reservation", flat=True))
    assert rows == {r.reservation_id for r in reserved}
    wait_for(lambda: reservations[0].client.xlen(GroupKeys.of(group).pending) == 0, timeout=10)
    assert stock_left(voucher) == 0
    # The drain left the stream's consumer group once it had written everything.
    wait_for(lambda: reservations[0].client.xinfo_consumers(GroupKeys.of(group).pending, "persist") == [], timeout=10)


def drains_written(log: Path) -> list[int]:
    """What each drain task the worker ran to its end says it wrote, from the worker's log."""
    return [int(n) for n in re.findall(r"reservations_drain\[[^]]+\] succeeded in [^:]+: (\d+)", log.read_text())]


def test_a_busy_voucher_gets_a_second_drain_from_the_first_and_writes_each_reservation_once(
    reservations, make_voucher, tmp_path
):
    """One task sent, as a crowd's first reservation sends it: its first full batch asks for
    another drain, which a second worker process runs beside it (two consumers read the
    stream, each writing some), and every reservation is written once."""
    instance_keys_emptied(BROKER)
    log = tmp_path / "worker.log"
    worker = Worker(concurrency=2, log=log, RESERVATIONS_PERSIST_CONSUMERS="2")
    worker.start()
    try:
        voucher = make_voucher(stock=6000)
        group = load(reservations, voucher, {stock_row(voucher): 6000}, limit=1)
        reserved = [reservations[0].reserve(group_id=group, user_id=u, rand=0.5) for u in users(6000)]
        send(reservations_drain, "voucher", voucher.pk, voucher.group_id)
        wait_for(lambda: Order.objects.filter(voucher=voucher).count() == 6000)
        # Each drain reports what it wrote as it ends, after a stay of its own (a few seconds).
        wait_for(lambda: sum(drains_written(log)) == 6000)
    finally:
        worker.stop()
    rows = list(Order.objects.filter(voucher=voucher).values_list("reservation", flat=True))
    assert len(rows) == 6000 and set(rows) == {r.reservation_id for r in reserved}
    assert stock_left(voucher) == 0
    written = drains_written(log)
    assert len([n for n in written if n]) == 2, written  # the first drain and the one it asked for
    assert reservations[0].client.xinfo_consumers(GroupKeys.of(group).pending, "persist") == []  # both left


def test_a_worker_killed_mid_batch_leaves_each_reservation_persisted_once(worker, reservations, make_pool):
    """5,000 draws; the worker is SIGKILLed as soon as the first rows are in, then a new one
    drains every second (as the periodic drain does): once the dead one's reservations have
    been idle long enough it takes them over, and each draw is written once."""
    pool = make_pool(prizes=(("Gold", 2500), ("Silver", 2500)), draws_per_user=1)
    stock = dict(Stock.objects.filter(group_id=pool.group_id).values_list("id", "quantity"))
    group = load(reservations, pool, stock, limit=1)
    reserved = [reservations[0].reserve(group_id=group, user_id=u, rand=0.5) for u in users(5000)]
    send(reservations_drain, "pool", pool.pk, pool.group_id)
    wait_for(lambda: Draw.objects.filter(pool=pool).exists())
    worker.kill()
    written_before_restart = Draw.objects.filter(pool=pool).count()
    assert written_before_restart < 5000, "the worker finished before it could be killed: raise the count"
    worker.start()

    def drained() -> bool:  # a drain every second, as the periodic task sends them
        send(reservations_drain, "pool", pool.pk, pool.group_id)
        time.sleep(1)
        return reservations[0].client.xlen(GroupKeys.of(group).pending) == 0

    wait_for(drained, timeout=90)
    draws = Draw.objects.filter(pool=pool)
    assert draws.count() == 5000
    assert set(draws.values_list("reservation", flat=True)) == {r.reservation_id for r in reserved}
    assert sum(Stock.objects.filter(group_id=group).values_list("quantity", flat=True)) == 0
    print(f"\nkilled after {written_before_restart} of 5000 draws; after the restart: 5000 draws, each once")


# --- the whole path: the services, the tasks they send, a real worker and beat ----------------------


@pytest.fixture
def app_worker(reservations_redis):
    """A worker on the broker the services send to (the test settings' own), which starts
    empty: stale messages of earlier tests would only find nothing to do, but cost time."""
    from config.celery import app

    app.set_current()  # the services' tasks send through it, whatever app a test made since
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete(instance_key("celery"))
    started: list[Worker] = []

    def start(*, beat: bool = False, **env: str) -> Worker:
        worker = Worker(settings.CELERY_BROKER_URL, beat=beat, **env)
        worker.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def drained(group_id: int) -> bool:
    return reservations_client().waiting(group_id=group_id) == 0


@pytest.mark.race
def test_many_processes_buying_and_drawing_then_every_invariant_holds(app_worker, make_voucher, make_pool):
    """8 processes x 8 threads buy a voucher of 20 and draw in a pool of 2 + 10 (limit 2)
    through the services, which send their drain tasks to a real worker. Once drained: the
    stock sold once, one order per buyer, every 202 one row, Redis and the database agree."""
    from inventory.redis_lua.item_states import item_reservations_check
    from lottery.product import POOL
    from lottery.selectors import pool_audit
    from orders.product import VOUCHER
    from orders.selectors import voucher_audit

    from .buyers import buy_concurrently, draw_concurrently

    app_worker()
    voucher = make_voucher(stock=20, strategy="redis_lua")
    pool = make_pool(prizes=(("Gold", 2), ("Silver", 10)), no_prize_weight=4, draws_per_user=2, strategy="redis_lua")
    people = users(64)
    plan = [people[i::8] for i in range(8)]
    bought = buy_concurrently(voucher_id=voucher.pk, plan=plan, race_ms=0)
    drew = draw_concurrently(pool_id=pool.pk, plan=[slots * 2 for slots in plan], race_ms=0)
    assert not bought.unexpected and not drew.unexpected
    assert len(bought.confirmed) == 20 and bought.refusals == {"sold_out": 44}
    wait_for(lambda: drained(voucher.group_id) and drained(pool.group_id), timeout=60)
    orders = Order.objects.filter(voucher=voucher)
    assert sorted(map(public_of, orders.values_list("reservation", flat=True))) == sorted(bought.confirmed)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert audit.ok and (audit.orders, audit.stock) == (20, 0)
    check = item_reservations_check(VOUCHER, item=voucher, reservations=reservations_client())
    assert check.state and not check.drifted  # invariant 5: Redis stock and buyers agree
    draws = Draw.objects.filter(pool=pool)
    assert sorted((public_of(one), prize) for one, prize in draws.values_list("reservation", "prize_id")) == sorted(
        drew.confirmed
    )
    assert pool_audit(pool_id=pool.pk).ok
    assert draws.exclude(prize=None).count() == 12  # every prize awarded once, none twice
    assert not item_reservations_check(POOL, item=pool, reservations=reservations_client()).drifted


def test_the_same_reservation_delivered_twice_makes_one_row(app_worker, api_client, make_voucher):
    """A consumer that committed and died before acknowledging leaves its reservations to
    be handed out again; and drains are sent more than once. One row each, whatever."""
    voucher = make_voucher(stock=10, strategy="redis_lua")
    answers = [api_client().post(f"/api/vouchers/{voucher.pk}/purchase").json() for _ in range(5)]
    first = reservations_client().pending(group_id=voucher.group_id, consumer="dead", count=2)
    for one in first:  # the dead consumer's commit, without its acknowledgement
        Order.objects.create(
            user_id=one.user_id,
            voucher=voucher,
            stock_id=one.stock_id,
            buyer_guard=one.user_id,
            reservation=one.reservation_id,
        )
    Stock.objects.filter(pk=stock_row(voucher)).update(quantity=8)
    app_worker(RESERVATIONS_CLAIM_IDLE_MS="0")
    for _ in range(3):
        reservations_drain.delay("voucher", voucher.pk, voucher.group_id)
    wait_for(lambda: drained(voucher.group_id) and Order.objects.filter(voucher=voucher).count() >= 5)
    time.sleep(1)  # the other drains ran too
    rows = list(Order.objects.filter(voucher=voucher).values_list("reservation", flat=True))
    assert sorted(rows) == sorted(internal_of(answer["order_id"]) for answer in answers)
    assert stock_left(voucher) == 5


def test_a_reservation_whose_web_process_died_before_sending_its_task_still_becomes_an_order(
    app_worker, make_voucher, make_user
):
    """The script ran and its process died: no drain task was ever sent. The beat's sweep
    finds the waiting reservation and has it written."""
    voucher = make_voucher(stock=3, strategy="redis_lua")
    buyer = make_user()
    reserved = reservations_client().reserve(group_id=voucher.group_id, user_id=buyer.pk, rand=0.5)
    assert reserved.kick  # the process was asked to send the task; it died instead
    app_worker()
    app_worker(beat=True, RESERVATIONS_SWEEP_SECONDS="1")
    wait_for(lambda: Order.objects.filter(reservation=reserved.reservation_id).exists(), timeout=30)
    assert Order.objects.get(reservation=reserved.reservation_id).user_id == buyer.pk
    assert stock_left(voucher) == 2


def test_redis_flushed_mid_sale_answers_503_until_rebuilt_and_sells_no_unit_twice(
    app_worker, api_client, make_voucher, reservations_redis
):
    voucher = make_voucher(stock=6, strategy="redis_lua")
    first = app_worker()
    early = [api_client() for _ in range(2)]
    for buyer in early:
        assert buyer.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 202
    wait_for(lambda: Order.objects.filter(voucher=voucher).count() == 2)
    # No worker may write the next reservation before Redis loses it (on a busy machine one
    # could win that race): the first stops, and another starts once the state is gone.
    first.stop()
    lost = api_client()
    lost_id = lost.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    # Redis restarts empty before the last reservation was written (the broker lives elsewhere):
    # this instance's keys, not the database, which other test workers' instances share.
    instance_keys_emptied(settings.RESERVATIONS_REDIS_URL)
    refused = api_client().post(f"/api/vouchers/{voucher.pk}/purchase")
    assert refused.status_code == 503 and refused.json()["code"] == "unavailable"
    # The refusal asked for a rebuild; a worker rebuilds from the database.
    app_worker()
    late = [api_client() for _ in range(6)]

    def sells_again() -> bool:
        return late[0].post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 202

    wait_for(sells_again, timeout=30)
    for buyer in late[1:]:
        buyer.post(f"/api/vouchers/{voucher.pk}/purchase")
    for buyer in early:  # the buyers came back with the state
        assert buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["code"] == "already_purchased"
    wait_for(lambda: drained(voucher.group_id))
    wait_for(lambda: Order.objects.filter(voucher=voucher).count() == 6)
    stock = Stock.objects.get(pk=stock_row(voucher))
    assert (stock.quantity, stock.initial_quantity) == (0, 6)  # the lost reservation's unit sold again, once
    assert not Order.objects.filter(reservation=lost_id, user=lost.user).exists()
    assert lost.get(f"/api/orders/{lost_id}").status_code == 404


def test_a_database_out_of_reach_for_too_long_undoes_the_reservation_and_tells_the_user(
    app_worker, api_client, make_voucher
):
    voucher = make_voucher(stock=1, strategy="redis_lua")
    buyer = api_client()
    order_id = buyer.post(f"/api/vouchers/{voucher.pk}/purchase").json()["order_id"]
    group = voucher.group_id
    assert reservations_client().stock(group_id=group) == {stock_row(voucher): 0}
    # A worker whose database does not answer (nothing listens on port 9), giving up after 1 s.
    app_worker(DATABASE_URL="mysql://root:@127.0.0.1:9/test", RESERVATIONS_GIVE_UP_SECONDS="1")
    time.sleep(1.5)

    def undone() -> bool:
        reservations_drain.delay("voucher", voucher.pk, group)  # as the sweep sends it
        time.sleep(0.5)
        answer = buyer.get(f"/api/orders/{order_id}")
        assert answer.status_code == 200, (answer.status_code, answer.content)  # pending, then failed: never missing
        return answer.json()["status"] == "failed"

    wait_for(undone, timeout=60)
    assert "unreachable" in buyer.get(f"/api/orders/{order_id}").json()["reason"]
    assert reservations_client().stock(group_id=group) == {stock_row(voucher): 1}  # stock back
    assert reservations_client().takers(group_id=group) == {}  # buyer removed
    assert not Order.objects.filter(voucher=voucher).exists()
    assert buyer.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 202  # and may buy again
