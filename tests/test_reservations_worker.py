"""redis_lua persistence by a real Celery worker process: every reservation becomes one
order or draw, also when the worker is SIGKILLed in the middle of a batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from celery import Celery
from django.conf import settings
from django.db import connection

from accounts.services import users_with_tokens_create
from inventory.models import Stock
from inventory.persist import reservations_client
from inventory.reservations import GroupKeys, Rules
from lottery.models import Draw
from lottery.tasks import pool_reservations_drain
from orders.models import Order
from orders.tasks import voucher_reservations_drain

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent
# The test's own broker, so that no other test's message reaches this worker.
BROKER = "redis://127.0.0.1:6379/7"


def database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"mysql://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 3306}/{db['NAME']}"


class Worker:
    """A Celery worker process on the test database, started and killed at will."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "RESERVATIONS_REDIS_URL": settings.RESERVATIONS_REDIS_URL,
            "CELERY_BROKER_URL": BROKER,
            # Take a dead worker's reservations over after 2 s rather than 30.
            "RESERVATIONS_CLAIM_IDLE_MS": "2000",
            "PYTHONPATH": str(ROOT),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "--quiet", "worker", "--concurrency", "1",
             "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=env, start_new_session=True,
        )  # fmt: skip

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
    redis.Redis.from_url(BROKER).flushdb()
    worker = Worker()
    worker.start()
    yield worker
    worker.stop()


def send(task, *args) -> None:
    """Send ``task`` to the test's own broker, as the web process would to its own."""
    with Celery(broker=BROKER) as sender:
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
    group_id = item.stock.group_id if hasattr(item, "stock") else item.group_id
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
    group = load(reservations, voucher, {voucher.stock_id: 300}, limit=1)
    reserved = [reservations[0].reserve(group_id=group, user_id=u, rand=0.5) for u in users(300)]
    send(voucher_reservations_drain, voucher.pk, voucher.stock.group_id)
    wait_for(lambda: Order.objects.filter(voucher=voucher).count() == 300)
    rows = set(Order.objects.filter(voucher=voucher).values_list("reservation", flat=True))
    assert rows == {r.reservation_id for r in reserved}
    wait_for(lambda: reservations[0].client.xlen(GroupKeys.of(group).pending) == 0, timeout=10)
    assert Stock.objects.get(pk=voucher.stock_id).quantity == 0


def test_a_worker_killed_mid_batch_leaves_each_reservation_persisted_once(worker, reservations, make_pool):
    """5,000 draws; the worker is SIGKILLed as soon as the first rows are in, then a new one
    drains every second (as the periodic drain does): once the dead one's reservations have
    been idle long enough it takes them over, and each draw is written once."""
    pool = make_pool(prizes=(("Gold", 2500), ("Silver", 2500)), draws_per_user=1)
    stock = dict(Stock.objects.filter(group_id=pool.group_id).values_list("id", "quantity"))
    group = load(reservations, pool, stock, limit=1)
    reserved = [reservations[0].reserve(group_id=group, user_id=u, rand=0.5) for u in users(5000)]
    send(pool_reservations_drain, pool.pk, pool.group_id)
    wait_for(lambda: Draw.objects.filter(pool=pool).exists())
    worker.kill()
    written_before_restart = Draw.objects.filter(pool=pool).count()
    assert written_before_restart < 5000, "the worker finished before it could be killed: raise the count"
    worker.start()

    def drained() -> bool:  # a drain every second, as the periodic task sends them
        send(pool_reservations_drain, pool.pk, pool.group_id)
        time.sleep(1)
        return reservations[0].client.xlen(GroupKeys.of(group).pending) == 0

    wait_for(drained, timeout=90)
    draws = Draw.objects.filter(pool=pool)
    assert draws.count() == 5000
    assert set(draws.values_list("reservation", flat=True)) == {r.reservation_id for r in reserved}
    assert sum(Stock.objects.filter(group_id=group).values_list("quantity", flat=True)) == 0
    print(f"\nkilled after {written_before_restart} of 5000 draws; after the restart: 5000 draws, each once")
