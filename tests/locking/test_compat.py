"""``locking.compat.Lock`` behaves as redis-py documents ``redis.lock.Lock``.

Each test runs against both classes, so a difference shows as a failure of ours.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
import redis
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock as RedisPyLock

from locking.compat import Lock as CompatLock

from .conftest import LOCK_TEST_DB


@pytest.fixture(params=[CompatLock, RedisPyLock], ids=["compat", "redis-py"])
def Lock(request):
    return request.param


def test_lock_and_release(r, Lock):
    lock = Lock(r, "foo")
    assert lock.acquire(blocking=False)
    assert r.get("foo") == lock.local.token
    assert r.ttl("foo") == -1  # timeout=None: no expiry
    assert lock.locked() and lock.owned()
    lock.release()
    assert r.get("foo") is None
    assert not lock.locked()


def test_another_object_does_not_own_it(r, Lock):
    first, second = Lock(r, "foo"), Lock(r, "foo")
    assert first.acquire(blocking=False)
    assert second.locked() and not second.owned()
    assert not second.acquire(blocking=False)
    first.release()
    assert second.acquire(blocking=False)
    second.release()


def test_timeout_sets_the_expiry(r, Lock):
    lock = Lock(r, "foo", timeout=10)
    assert lock.acquire(blocking=False)
    assert 8 < r.ttl("foo") <= 10
    lock.release()


def test_float_timeout(r, Lock):
    lock = Lock(r, "foo", timeout=9.5)
    assert lock.acquire(blocking=False)
    assert 8000 < r.pttl("foo") <= 9500
    lock.release()


def test_blocking_timeout_gives_up(r, Lock):
    holder = Lock(r, "foo")
    assert holder.acquire(blocking=False)
    waiter = Lock(r, "foo", blocking_timeout=0.2)
    started = time.monotonic()
    assert not waiter.acquire()
    assert 0.1 < time.monotonic() - started < 0.5
    holder.release()


def test_high_sleep_small_blocking_timeout_returns_at_once(r, Lock):
    holder = Lock(r, "foo")
    assert holder.acquire(blocking=False)
    waiter = Lock(r, "foo", sleep=10, blocking_timeout=0.1)
    started = time.monotonic()
    assert not waiter.acquire()
    assert time.monotonic() - started < 1
    holder.release()


def test_blocking_acquire_waits_for_release(r, Lock):
    holder = Lock(r, "foo", thread_local=False)  # released from the timer's thread
    holder.acquire()
    threading.Timer(0.2, holder.release).start()
    waiter = Lock(r, "foo", sleep=0.01, blocking_timeout=2)
    assert waiter.acquire()
    waiter.release()


def test_context_manager(r, Lock):
    with Lock(r, "foo", blocking_timeout=0.2) as lock:
        assert r.get("foo") == lock.local.token
    assert r.get("foo") is None


def test_context_manager_raises_when_not_acquired(r, Lock):
    holder = Lock(r, "foo")
    holder.acquire()
    with pytest.raises(LockError):
        with Lock(r, "foo", blocking_timeout=0.1):
            pass
    holder.release()


def test_releasing_an_unlocked_lock_raises(r, Lock):
    with pytest.raises(LockError):
        Lock(r, "foo").release()


def test_releasing_a_lock_that_expired_raises_not_owned(r, Lock):
    lock = Lock(r, "foo", timeout=0.05)
    lock.acquire(blocking=False)
    time.sleep(0.1)
    with pytest.raises(LockNotOwnedError):
        lock.release()


def test_context_manager_can_log_instead_of_raising_on_release_error(r, Lock, caplog):
    with pytest.raises(LockNotOwnedError):
        with Lock(r, "foo", timeout=10):
            r.delete("foo")  # lost, as by its expiry
    assert caplog.records == []
    with caplog.at_level(logging.WARNING):
        with Lock(r, "foo", timeout=10, raise_on_release_error=False):
            r.delete("foo")
    (warning,) = caplog.records
    assert warning.levelno == logging.WARNING
    assert "no longer owned" in warning.getMessage()


def test_extend_adds_or_replaces_time(r, Lock):
    lock = Lock(r, "foo", timeout=10)
    assert lock.acquire(blocking=False)
    assert lock.extend(10)
    assert 16000 < r.pttl("foo") <= 20000
    assert lock.extend(5, replace_ttl=True)
    assert 4000 < r.pttl("foo") <= 5000
    lock.release()


def test_extend_refuses_unlocked_untimed_and_lost_locks(r, Lock):
    with pytest.raises(LockError):
        Lock(r, "foo", timeout=10).extend(10)
    untimed = Lock(r, "bar")
    untimed.acquire(blocking=False)
    with pytest.raises(LockError):
        untimed.extend(10)
    lost = Lock(r, "baz", timeout=10)
    lost.acquire(blocking=False)
    r.set("baz", "someone-else")
    with pytest.raises(LockNotOwnedError):
        lost.extend(10)


def test_reacquire_resets_the_time(r, Lock):
    lock = Lock(r, "foo", timeout=10)
    lock.acquire(blocking=False)
    r.pexpire("foo", 5000)
    assert lock.reacquire()
    assert 8000 < r.pttl("foo") <= 10000
    r.set("foo", "someone-else")
    with pytest.raises(LockNotOwnedError):
        lock.reacquire()


def test_a_given_token_is_used(r, Lock):
    lock = Lock(r, "foo")
    assert lock.acquire(blocking=False, token="my-token")
    assert r.get("foo") == b"my-token"
    assert lock.owned()
    lock.release()


def test_tokens_are_thread_local_by_default(r, Lock):
    lock = Lock(r, "foo")
    lock.acquire(blocking=False)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(getattr(lock.local, "token", None)))
    thread.start()
    thread.join()
    assert seen == [None]  # another thread sees no token
    shared = Lock(r, "bar", thread_local=False)
    shared.acquire(blocking=False)
    thread = threading.Thread(target=shared.release)
    thread.start()
    thread.join()
    assert not shared.locked()
    lock.release()


def test_owned_with_decoded_responses(Lock):
    client = redis.Redis(host="127.0.0.1", port=6379, db=LOCK_TEST_DB, decode_responses=True)
    lock = Lock(client, "decoded")
    lock.acquire(blocking=False)
    assert lock.owned()
    lock.release()
    client.close()


def test_usable_as_lock_class_of_redis_lock(r):
    lock = r.lock("foo", timeout=5, lock_class=CompatLock)
    assert isinstance(lock, CompatLock)
    with lock:
        assert r.pttl("foo") > 0


@pytest.mark.django_db
def test_usable_behind_django_redis_cache_lock(settings):
    from django.core.cache import cache

    client = cache.client.get_client(write=True)
    lock = cache.lock("compat-demo", timeout=5)  # OPTIONS["REDIS_CLIENT_CLASS"] is locking.compat.Redis
    assert isinstance(lock, CompatLock)
    with lock:
        assert lock.owned()
        assert client.pttl(lock.name) > 0
    assert not lock.locked()
