"""The Django side: the lock connection check, the lock client and fenced writes."""

from __future__ import annotations

import os
import signal

import pytest
from django.db.models import F

from inventory.models import Stock
from locking import CountingMetrics, Lock, LockError, StaleFence, redlock
from locking.integration import (
    FENCE_GAP,
    FencedUpdate,
    fenced_update,
    lock_connection_check,
    locks_redis,
    redlock_redis,
)
from locking.redlock import Redlock
from locking.testing import RedisServer
from tests.stock import stock_left, stock_row

pytestmark = pytest.mark.live


def test_the_check_passes_against_a_real_redis(settings):
    settings.LOCK_REDIS_URLS = []
    assert lock_connection_check(None) == []


def test_the_check_names_a_lock_server_that_does_not_answer(settings):
    settings.LOCK_REDIS_URL = "redis://127.0.0.1:1/0"
    settings.LOCK_REDIS_URLS = []
    [error] = lock_connection_check(None)
    assert error.id == "locking.E002"


def test_the_check_refuses_a_url_that_is_not_redis(settings):
    settings.LOCK_REDIS_URLS = ["http://127.0.0.1:6379"]
    assert [e.id for e in lock_connection_check(None)] == ["locking.E001"]


def test_locks_redis_is_one_client_per_url_and_process(settings):
    assert locks_redis() is locks_redis()
    # Another database of the same server than the settings' own, whichever that is.
    other = 14 if settings.LOCK_REDIS_URL.endswith("/13") else 13
    assert locks_redis(f"redis://127.0.0.1:6379/{other}") is not locks_redis()


# --- fenced writes ----------------------------------------------------------------------------


class Holder:
    """What a fenced write needs of a lock: its fence (and, optionally, metrics)."""

    def __init__(self, fence: int) -> None:
        self.fence = fence
        self.label = "stock"
        self.metrics = CountingMetrics()


@pytest.mark.django_db
def test_a_prepared_update_writes_with_the_fence_of_the_holder_that_runs_it(make_voucher):
    voucher = make_voucher(stock=5)
    update = FencedUpdate(
        Stock.objects.filter(pk=stock_row(voucher), quantity__gte=2),
        quantity=F("quantity") - 2,
        version=F("version") + 1,
    )
    assert update.run(Holder(fence=7)) == 1
    assert update.run(Holder(fence=8)) == 1  # prepared once, run by each holder in turn
    stock = Stock.objects.get(pk=stock_row(voucher))
    assert (stock.quantity, stock.version, stock.fence) == (1, 2, 8)


@pytest.mark.django_db
def test_a_prepared_update_leaves_rows_that_fail_its_own_conditions(make_voucher):
    voucher = make_voucher(stock=1)
    update = FencedUpdate(Stock.objects.filter(pk=stock_row(voucher), quantity__gte=2), quantity=F("quantity") - 2)
    assert update.run(Holder(fence=3)) == 0  # not written, and not stale either
    stock = Stock.objects.get(pk=stock_row(voucher))
    assert (stock.quantity, stock.fence) == (1, 0)


@pytest.mark.django_db
def test_a_stale_holder_is_refused_and_writes_nothing(make_voucher):
    voucher = make_voucher(stock=5)
    update = FencedUpdate(Stock.objects.filter(pk=stock_row(voucher)), quantity=F("quantity") - 1)
    update.run(Holder(fence=10))
    stale = Holder(fence=9)
    with pytest.raises(StaleFence):
        update.run(stale)
    with pytest.raises(StaleFence):  # its own fence, but the lock is not held: no raise
        fenced_update(Stock.objects.filter(pk=stock_row(voucher)), lock=Holder(fence=10), quantity=0)
    assert stale.metrics.counts["stale_fence"] == 1
    stock = Stock.objects.get(pk=stock_row(voucher))
    assert (stock.quantity, stock.fence) == (4, 10)


@pytest.mark.django_db
def test_the_holding_that_wrote_a_row_writes_it_again_with_the_next_fence(make_voucher, r, caplog):
    """A second write under one holding is no sign of a lost counter: the fence moves by one,
    not past the rows by a gap, and no warning says the counter was behind."""
    voucher = make_voucher(stock=5)
    with Lock(r, "stock") as lock:
        fence = lock.fence
        assert fenced_update(Stock.objects.filter(pk=stock_row(voucher)), lock=lock, quantity=4) == 1
        assert fenced_update(Stock.objects.filter(pk=stock_row(voucher)), lock=lock, quantity=3) == 1
        assert lock.fence == fence + 1
    stock = Stock.objects.get(pk=stock_row(voucher))
    assert (stock.quantity, stock.fence) == (3, fence + 1)
    assert "behind the database" not in caplog.text


# --- fences across a Redis restarted empty ------------------------------------------------------


@pytest.fixture
def own_redis():
    """A Redis server of the test's own, to restart empty."""
    server = RedisServer().start()
    yield server
    server.close()


def restart_empty(server: RedisServer) -> None:
    server.stop()
    server.start()


@pytest.mark.django_db
def test_fenced_writes_resume_above_the_database_after_the_redis_restarted_empty(make_voucher, own_redis):
    voucher = make_voucher(stock=50)
    update = FencedUpdate(Stock.objects.filter(pk=stock_row(voucher)), quantity=F("quantity") - 1)
    client = locks_redis(own_redis.url)
    for _ in range(30):
        with Lock(client, "stock-group:1") as lock:
            update.run(lock)
    written = Stock.objects.get(pk=stock_row(voucher)).fence
    assert written == 30

    restart_empty(own_redis)
    with Lock(client, "stock-group:1") as lock:
        assert lock.fence == 1  # the counter is gone: counted from 1 again, below the rows
        assert update.run(lock) == 1
        assert lock.fence > written + FENCE_GAP
    with Lock(client, "stock-group:1") as after:
        assert after.fence > lock.fence  # the counter itself moved, not only that holding
        assert update.run(after) == 1

    stock = Stock.objects.get(pk=stock_row(voucher))
    assert (stock.quantity, stock.fence) == (50 - 32, after.fence)


@pytest.mark.django_db
def test_a_holder_from_before_the_restart_is_still_refused(make_voucher, own_redis):
    voucher = make_voucher(stock=50)
    update = FencedUpdate(Stock.objects.filter(pk=stock_row(voucher)), quantity=F("quantity") - 1)
    client = locks_redis(own_redis.url)
    before = Lock(client, "stock-group:1", renew=False)
    before.acquire()
    update.run(before)

    restart_empty(own_redis)
    with Lock(client, "stock-group:1") as after:
        update.run(after)
        # Its lock is gone with the old Redis, and the row carries a newer fence: its
        # counter cannot be moved for it, and its write is refused.
        with pytest.raises(StaleFence):
            update.run(before)
    assert before.raise_fence(10**9) is None
    assert stock_left(voucher) == 48


@pytest.mark.django_db
def test_redlock_fences_resume_above_the_database_after_every_server_restarted_empty(make_voucher):
    servers = [RedisServer().start() for _ in range(3)]
    try:
        voucher = make_voucher(stock=50)
        update = FencedUpdate(Stock.objects.filter(pk=stock_row(voucher)), quantity=F("quantity") - 1)
        clients = [locks_redis(server.url) for server in servers]
        for _ in range(5):
            with Redlock(clients, "stock-group:1") as lock:
                update.run(lock)
        written = Stock.objects.get(pk=stock_row(voucher)).fence

        for server in servers:
            restart_empty(server)
        with Redlock(clients, "stock-group:1") as lock:
            assert lock.fence <= written
            assert update.run(lock) == 1
            assert lock.fence > written + FENCE_GAP
        with Redlock(clients, "stock-group:1") as after:
            assert after.fence > lock.fence
            assert update.run(after) == 1
    finally:
        for server in servers:
            server.close()


@pytest.mark.django_db
def test_a_fenced_write_refuses_an_unfenced_lock(make_voucher):
    voucher = make_voucher(stock=5)
    update = FencedUpdate(Stock.objects.filter(pk=stock_row(voucher)), quantity=F("quantity") - 1)
    lock = Lock(locks_redis(), f"unfenced:{voucher.pk}", blocking=False, fenced=False)
    assert lock.acquire() == 0
    try:
        with pytest.raises(LockError, match="unfenced"):
            update.run(lock)
    finally:
        lock.release()
    assert stock_left(voucher) == 5


def test_the_sites_redlock_takes_its_lock_with_one_server_of_three_hung(redlock_urls, redlock_servers, settings):
    """A server that hangs (stopped: it accepts the connection, never answers) is waited for
    a tenth of the lease: with a lease and a second, every acquire ran past its lease and no
    lock was ever taken while one server of three hung."""
    settings.LOCK_LEASE_SECONDS = 5
    hung = redlock_servers[0]._process.pid
    os.kill(hung, signal.SIGSTOP)
    try:
        lock = Redlock([redlock_redis(url) for url in redlock_urls], "hung", lease=5, blocking=False)
        assert lock.acquire() is not None
        assert lock.validity > 0
        lock.release()
    finally:
        os.kill(hung, signal.SIGCONT)


def test_a_redlock_answers_on_its_majority_without_waiting_for_a_hung_server(redlock_urls, redlock_servers):
    """Clients that would wait a whole lease for the hung server: waited for, the acquire's
    validity was gone before it was taken. Answered on the majority, the lock is taken with
    nearly its whole lease, renewed and released on the two that answer."""
    import redis

    from locking.lease import Released

    hung = redlock_servers[0]._process.pid
    clients = [redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5) for url in redlock_urls]
    os.kill(hung, signal.SIGSTOP)
    try:
        lock = Redlock(clients, "hung-majority", lease=5, blocking=False)
        assert lock.acquire() is not None
        assert lock.validity > 2.5, lock.validity  # not a lease spent waiting for the hung one
        assert lock._renew_in_redis(lock._token)
        assert lock.release() is Released.RELEASED
        # Taken and let go over and over: the hung server's calls, each holding a thread of the
        # pool for its socket timeout, stop at a bound, and the others' are not queued behind.
        for _ in range(100):
            assert lock.acquire() is not None and lock.validity > 2.5
            lock.release()
        assert redlock._in_flight[id(clients[0])] <= redlock.IN_FLIGHT_MOST
    finally:
        os.kill(hung, signal.SIGCONT)


def test_a_redlock_taken_and_let_go_over_and_over_is_never_refused(redlock_urls):
    """Answered on its majority, an acquire leaves the slowest server's call running: its
    release must come after it on that server, or the key stays there a lease long, and a few
    such left no majority to be had (a lock nobody held, refused)."""
    lock = Redlock([redlock_redis(url) for url in redlock_urls], "over-and-over", lease=5, blocking=False)
    for _ in range(300):
        assert lock.acquire() is not None
        lock.release()
