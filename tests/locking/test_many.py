"""lock_many: all or nothing, on a real Redis."""

from __future__ import annotations

import threading
import time

from locking import CountingMetrics, Lock, Released, lock_many
from locking.lock import resource_keys
from tests.waiting import wait_until


def held_keys(r) -> set[bytes]:
    return {key for key in r.scan_iter("lock:{*}") if not key.endswith(b"}:fence")}


def test_takes_every_key_and_returns_a_fence_for_each(r):
    held = lock_many(r, ["user:7", "stock:42"])
    fences = held.acquire()
    assert set(fences) == {"user:7", "stock:42"} and all(f >= 1 for f in fences.values())
    assert held_keys(r) == {resource_keys("user:7")[0].encode(), resource_keys("stock:42")[0].encode()}
    assert held.release() is Released.RELEASED
    assert held_keys(r) == set()


def test_takes_nothing_when_one_key_is_already_held(r):
    names = [f"item:{n}" for n in range(50)]
    other = Lock(r, "item:37")
    other.acquire()
    assert lock_many(r, names, blocking=False).acquire() is None
    assert held_keys(r) == {resource_keys("item:37")[0].encode()}  # no partial hold
    other.release()


def test_a_waiter_gets_all_keys_once_the_holder_releases(r):
    other = Lock(r, "item:2")
    other.acquire()
    threading.Timer(0.1, other.release).start()
    held = lock_many(r, ["item:1", "item:2", "item:3"], blocking_timeout=5)
    assert held.acquire() is not None
    held.release()


def test_gives_up_after_blocking_timeout_holding_nothing(r):
    other = Lock(r, "item:2")
    other.acquire()
    started = time.monotonic()
    assert lock_many(r, ["item:1", "item:2"], blocking_timeout=0.2).acquire() is None
    assert time.monotonic() - started >= 0.2
    assert held_keys(r) == {resource_keys("item:2")[0].encode()}
    other.release()


def test_3000_keys_all_or_nothing(r):
    names = [f"sku:{n}" for n in range(3000)]
    held = lock_many(r, names, blocking=False)
    assert len(held.acquire()) == 3000
    assert len(held_keys(r)) == 3000
    assert lock_many(r, ["sku:2999", "other"], blocking=False).acquire() is None
    assert held.release() is Released.RELEASED
    assert held_keys(r) == set()


def test_release_hands_each_key_to_a_single_lock_waiter(r):
    held = lock_many(r, ["a", "b"])
    held.acquire()
    got = []
    waiter = Lock(r, "b", blocking_timeout=5)
    thread = threading.Thread(target=lambda: got.append(waiter.acquire()))
    thread.start()
    while r.llen(resource_keys("b")[2]) < 1:
        time.sleep(0.005)
    started = time.monotonic()
    held.release()
    thread.join(5)
    assert got and got[0] is not None
    assert time.monotonic() - started < 1  # woken by the hand-off, not by the 10 s lease
    waiter.release()


def test_the_watchdog_renews_every_key(r):
    # A lease of a second, renewed every third of it: three renewals outlast the first lease,
    # and a loaded machine's stall of some tenths of a second loses nothing.
    metrics = CountingMetrics()
    held = lock_many(r, [f"k:{n}" for n in range(10)], lease=1.0, metrics=metrics)
    with held:
        wait_until(lambda: metrics.counts.get("renewed", 0) >= 4, "four renewals of every key")
        held.check()
        assert all(0 < r.pttl(resource_keys(f"k:{n}")[0]) <= 1000 for n in range(10))
    assert held_keys(r) == set()


def test_losing_one_key_is_losing_the_lock(r):
    held = lock_many(r, ["x", "y"], lease=0.3)
    held.acquire()
    r.delete(resource_keys("y")[0])
    assert held.lost.wait(1)
    assert held.release() is Released.EXPIRED


def test_a_key_prefix_excludes_a_lock_of_the_same_prefix_and_name(r):
    held = lock_many(r, ["a", "b"], key_prefix="ns:")
    held.acquire()
    assert Lock(r, "b", key_prefix="ns:", blocking=False).acquire() is None
    assert Lock(r, "b", blocking=False).acquire() is not None  # another namespace's "b"
    assert held.release() is Released.RELEASED
