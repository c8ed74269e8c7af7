"""The safe lock against a real Redis: acquisition, hand-off, leases, release."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import redis

from locking import CountingMetrics, Lock, LockError, LockLost, LockNotOwned, LockTimeout, Released
from locking.lock import resource_keys
from locking.testing import RedisServer
from locking.watchdog import watchdog
from tests.waiting import wait_until

from .conftest import LOCK_TEST_DB


def test_acquire_returns_increasing_fences_and_release_frees_the_key(r):
    lock = Lock(r, "res")
    first = lock.acquire()
    assert first == 1 and lock.owned() and lock.locked()
    assert lock.release() is Released.RELEASED
    assert not lock.locked()
    assert lock.acquire() == 2
    lock.release()


def test_the_token_is_128_random_bits_and_the_key_has_a_lease(r):
    lock = Lock(r, "res", lease=7)
    lock.acquire()
    key = resource_keys("res")[0]
    assert len(r.get(key)) == 32  # hex
    assert 6000 < r.pttl(key) <= 7000
    lock.release()


def test_fail_fast_returns_none_while_someone_holds_it(r):
    holder, other = Lock(r, "res"), Lock(r, "res", blocking=False)
    holder.acquire()
    assert other.acquire() is None
    with pytest.raises(LockTimeout):
        with other:
            pass
    holder.release()
    assert other.acquire() is not None
    other.release()


def test_a_waiter_that_times_out_leaves_nothing_behind(r):
    holder, waiter = Lock(r, "res"), Lock(r, "res", blocking_timeout=0.2)
    holder.acquire()
    started = time.monotonic()
    assert waiter.acquire() is None
    assert time.monotonic() - started >= 0.2
    _, _, queue, wake = resource_keys("res")
    assert r.llen(queue) == 0
    assert holder.release() is Released.RELEASED  # not handed to the departed waiter
    assert not r.keys(wake + "*")


def test_release_hands_the_lock_to_waiters_in_arrival_order(r):
    holder = Lock(r, "res")
    holder.acquire()
    order: list[int] = []
    threads = []
    for n in range(5):
        waiter = Lock(r, "res", blocking_timeout=10)

        def wait_then_record(lock=waiter, n=n):
            with lock:
                order.append(n)

        thread = threading.Thread(target=wait_then_record)
        thread.start()
        threads.append(thread)
        _, _, queue, _ = resource_keys("res")
        while r.llen(queue) < n + 1:  # this waiter is queued before the next one starts
            time.sleep(0.005)
    assert holder.release() is Released.HANDED_OFF
    for thread in threads:
        thread.join(10)
    assert order == [0, 1, 2, 3, 4]


def test_a_newcomer_queues_behind_waiters_instead_of_barging(r):
    holder = Lock(r, "res")
    holder.acquire()
    got: list[str] = []
    waiter = Lock(r, "res", blocking_timeout=10)
    thread = threading.Thread(target=lambda: (waiter.acquire(), got.append("waiter")))
    thread.start()
    _, _, queue, _ = resource_keys("res")
    while r.llen(queue) < 1:
        time.sleep(0.005)
    holder.release()
    assert Lock(r, "res", blocking=False).acquire() is None  # the waiter holds it already
    thread.join(10)
    assert got == ["waiter"]
    waiter.release()


def test_release_is_idempotent(r):
    lock = Lock(r, "res")
    lock.acquire()
    assert lock.release() is Released.RELEASED
    assert lock.release() is Released.NOT_HELD


def test_release_after_the_lease_expired_says_so_and_frees_nobody_elses_lock(r):
    lock = Lock(r, "res", lease=0.2, renew=False)
    lock.acquire()
    time.sleep(0.3)
    other = Lock(r, "res")
    other.acquire()
    assert lock.release() is Released.EXPIRED
    assert other.owned()
    other.release()


def test_leaving_the_block_after_the_lease_expired_raises_lock_lost(r):
    with pytest.raises(LockLost):
        with Lock(r, "res", lease=0.2, renew=False):
            time.sleep(0.3)


def test_an_exception_in_the_block_releases_and_propagates(r):
    lock = Lock(r, "res")
    with pytest.raises(ZeroDivisionError):
        with lock:
            1 / 0  # noqa: B018
    assert not lock.locked()


def test_reentrant_lock_counts_holds(r):
    lock = Lock(r, "res", reentrant=True)
    assert lock.acquire() == lock.acquire()
    lock.release()
    assert lock.owned()
    lock.release()
    assert not lock.locked()


def test_a_non_reentrant_lock_refuses_to_nest(r):
    lock = Lock(r, "res")
    with lock:
        with pytest.raises(LockError):
            lock.acquire()


def test_check_and_release_refuse_a_lock_never_acquired(r):
    with pytest.raises(LockNotOwned):
        Lock(r, "res").check()


def test_a_waiter_wakes_at_the_holders_lease_end_when_the_holder_vanishes(r):
    crashed = Lock(r, "res", lease=0.3, renew=False)
    crashed.acquire()  # and never released
    waiter = Lock(r, "res", blocking_timeout=5)
    assert waiter.acquire() is not None  # woke at the lease end, not at the timeout
    waiter.release()


def test_watchdog_keeps_the_lock_for_three_leases_of_work(r):
    metrics = CountingMetrics()
    lock = Lock(r, "res", lease=0.3, metrics=metrics)
    with lock:
        time.sleep(0.9)
        lock.check()
        assert lock.owned()
    assert metrics.counts["renewed"] >= 3
    assert "lost" not in metrics.counts


def test_watchdog_stops_when_the_block_exits_normally_or_by_exception(r):
    before = len(watchdog())
    with Lock(r, "a", lease=0.3):
        assert len(watchdog()) == before + 1
    assert len(watchdog()) == before
    with pytest.raises(RuntimeError):
        with Lock(r, "b", lease=0.3):
            raise RuntimeError
    assert len(watchdog()) == before


def test_a_lease_taken_away_is_signalled_at_once(r):
    reasons: list[str] = []
    lost = threading.Event()
    lock = Lock(r, "res", lease=0.3, on_lost=lambda lk, reason: (reasons.append(reason), lost.set()))
    lock.acquire()
    r.delete(resource_keys("res")[0])  # someone deletes the key (an operator, an eviction)
    assert lost.wait(1), "the holder was not told"
    assert lock.lost.is_set() and reasons
    with pytest.raises(LockLost):
        lock.check()
    lock.release()


def test_max_hold_caps_renewal(r):
    lock = Lock(r, "res", lease=0.3, max_hold=0.5)
    lock.acquire()
    assert lock.lost.wait(2)
    assert "max_hold" in lock.lost_reason  # told no later than the key expires (we count from before renewal)
    deadline = time.monotonic() + 0.5
    while lock.locked() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not lock.locked()
    assert lock.release() is Released.EXPIRED


def test_metrics_see_contention_and_release(r):
    metrics = CountingMetrics()
    holder = Lock(r, "res", metrics=metrics)
    holder.acquire()
    waiter = Lock(r, "res", metrics=metrics, blocking_timeout=5)
    thread = threading.Thread(target=waiter.acquire)
    thread.start()
    time.sleep(0.05)
    holder.release()
    thread.join(5)
    waiter.release()
    assert metrics.counts["uncontended"] == 1 and metrics.counts["contended"] == 1
    assert metrics.counts["released"] == 2
    assert metrics.waits[1] >= 0.04


def test_a_dropped_connection_is_reported_and_the_lock_kept_over_a_new_one(r):
    metrics = CountingMetrics()
    lock = Lock(r, "res", lease=0.6, metrics=metrics)
    lock.acquire()
    time.sleep(0.3)  # the watchdog has its connection open now
    killer = type(r)(host="127.0.0.1", port=6379, db=LOCK_TEST_DB)
    # Only this test's connections (its database): other processes share the server.
    own = killer.client_id()
    mine = [c["id"] for c in killer.client_list() if int(c["db"]) == LOCK_TEST_DB and int(c["id"]) != own]
    killed = sum(killer.execute_command("CLIENT", "KILL", "ID", client_id) for client_id in mine)
    assert killed >= 1
    deadline = time.monotonic() + 2
    while "renewal_failed" not in metrics.counts and time.monotonic() < deadline:
        time.sleep(0.01)
    assert metrics.counts.get("renewal_failed") == 1, "the holder was not told of the dropped connection"
    assert "Connection" in type(metrics.errors[0]).__name__
    time.sleep(0.6)  # renewed again, over a fresh connection
    assert lock.owned() and not lock.lost.is_set()
    assert lock.release() is Released.RELEASED
    killer.close()


def test_a_waiter_whose_wait_ends_in_an_error_leaves_the_queue(r):
    """Its connection timed out while it waited (as a worker's time limit or a signal would
    end it): left queued, the next release handed the lock to nobody for a lease."""
    holder = Lock(r, "res", lease=5)
    holder.acquire()
    impatient = redis.Redis(host="127.0.0.1", port=6379, db=LOCK_TEST_DB, socket_timeout=0.2)
    with pytest.raises(redis.TimeoutError):
        Lock(impatient, "res", lease=5).acquire()
    _, _, queue, _ = resource_keys("res")
    assert r.llen(queue) == 0
    assert holder.release() is Released.RELEASED  # to nobody
    assert Lock(r, "res", blocking=False).acquire() is not None  # free at once
    impatient.close()


def test_a_failing_lost_hook_ends_its_own_renewals_not_every_other_locks(r):
    """The watchdog thread renews every lock of the process: a hook of one holder's that
    raised ended it, and no other lock was renewed again."""

    def failing_hook(lock, reason):
        raise RuntimeError("the holder's hook failed")

    doomed = Lock(r, "doomed", lease=0.3, on_lost=failing_hook)
    metrics = CountingMetrics()
    other = Lock(r, "other", lease=0.3, metrics=metrics)
    doomed.acquire()
    other.acquire()
    r.delete(resource_keys("doomed")[0])  # its key gone: the next renewal finds it lost
    wait_until(doomed.lost.is_set, "the doomed lock was found lost")
    renewed = metrics.counts.get("renewed", 0)
    wait_until(lambda: metrics.counts.get("renewed", 0) >= renewed + 3, "the other lock renewed on")
    other.check()
    assert other.owned()
    other.release()
    doomed.release()


def test_an_unfenced_lock_excludes_as_any_and_leaves_no_key_behind(r):
    """A guard's lock (one per user of each item): a fence counter, which never expires,
    would be a key for every buyer a site ever had."""
    first, second = Lock(r, "user:7", blocking=False, fenced=False), Lock(r, "user:7", blocking=False, fenced=False)
    assert first.acquire() == 0 and first.owned()
    assert second.acquire() is None  # held: fail-fast
    assert first.release() is Released.RELEASED
    assert r.keys("*") == []
    assert second.acquire() == 0
    second.release()
    with pytest.raises(ValueError, match="fail-fast"):
        Lock(r, "user:7", fenced=False).acquire()


def test_a_lock_whose_renewal_fails_in_a_hook_is_marked_lost(r):
    """Its renewals stop there: its lease runs out in Redis, so ``check()`` must say so."""

    class FailingRenewedHook(CountingMetrics):
        def renewed(self, name):
            raise RuntimeError("the metrics' hook failed")

    lock = Lock(r, "hooked", lease=0.3, metrics=FailingRenewedHook())
    lock.acquire()
    wait_until(lock.lost.is_set, "the lock was marked lost")
    with pytest.raises(LockLost):
        lock.check()
    lock.release()


class _ReplyLostOnce(redis.Connection):
    """A connection that loses the answer to the first busy ACQUIRE after the server ran it,
    as a timeout does: a client that retries would send the script again."""

    lost = False

    def read_response(self, *args, **kwargs):
        answer = super().read_response(*args, **kwargs)
        if not _ReplyLostOnce.lost and isinstance(answer, list) and answer[:1] == [0]:
            _ReplyLostOnce.lost = True
            raise redis.TimeoutError("the answer was lost")
        return answer


def test_an_acquire_whose_answer_is_lost_is_not_sent_again_and_leaves_the_queue(r):
    """redis-py's client retries a call cut off (three times by default): a busy ACQUIRE run
    twice queued its caller twice, and its first release handed the lock to its stale entry."""
    holder = Lock(r, "res")
    holder.acquire()
    _ReplyLostOnce.lost = False
    retrying = redis.Redis(host="127.0.0.1", port=6379, db=LOCK_TEST_DB)  # the default policy: retries
    retrying.connection_pool.connection_class = _ReplyLostOnce
    try:
        with pytest.raises(redis.TimeoutError):
            Lock(retrying, "res", blocking_timeout=0.5).acquire()
    finally:
        retrying.close()
    assert _ReplyLostOnce.lost
    assert r.llen(resource_keys("res")[2]) == 0  # the one entry it made is gone with it
    assert holder.release() is Released.RELEASED  # nobody's stale entry is handed the lock


def test_a_thread_may_not_acquire_a_lock_object_another_thread_holds(r):
    """Its holding would replace the holder's, and the holder's release end it unseen."""
    lock = Lock(r, "res")
    lock.acquire()
    errors = []

    def other() -> None:
        try:
            lock.acquire()
        except LockError as error:
            errors.append(error)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(5)
    assert errors and "another thread" in str(errors[0])
    assert lock.release() is Released.RELEASED


def test_a_renewal_on_a_hung_server_does_not_hold_up_another_servers_locks(r):
    """One thread renews every lock of the process in turn. A lock's server stops answering
    (SIGSTOP: its connections stay open, unanswered), and the client waits for answers without
    a limit: each renewal of it waits a tenth of the lease, not for ever, and the other
    server's lock is renewed through three leases."""
    server = RedisServer().start()
    hung_client = redis.Redis.from_url(server.url)  # no socket timeout of its own
    try:
        on_hung = Lock(hung_client, "a", lease=1)
        on_hung.acquire()
        healthy = Lock(r, "b", lease=1)
        healthy.acquire()
        os.kill(server.pid, signal.SIGSTOP)
        try:
            ends = time.monotonic() + 3
            while time.monotonic() < ends:
                healthy.check()
                assert r.pttl(healthy.key) > 0
                time.sleep(0.05)
            assert on_hung.lost.is_set()  # its own renewals failed until its lease ended
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert healthy.release() is Released.RELEASED
        on_hung.release()
    finally:
        hung_client.close()
        server.close()


def test_a_waiter_held_up_past_its_claim_holds_nothing_until_it_is_handed_the_lock_again(r):
    """The lock is handed to a waiter while it is held up between two calls (a pause of its
    process) for longer than the hand-off's claim (a second), and another caller takes the
    lapsed key: the waiter's next ACQUIRE finds it taken and queues the waiter again, which
    holds the lock only once that caller hands it over, with a newer fence."""
    holder = Lock(r, "res", lease=1)
    holder.acquire()
    waiter, got = Lock(r, "res", lease=1, blocking_timeout=20), []
    paused, go = threading.Event(), threading.Event()
    wait_then_acquire = waiter._wait_then_acquire

    def held_up_once(*args):
        if not paused.is_set():
            paused.set()
            go.wait(10)
        return wait_then_acquire(*args)

    waiter._wait_then_acquire = held_up_once
    thread = threading.Thread(target=lambda: got.append(waiter.acquire()))
    thread.start()
    try:
        assert paused.wait(10)  # queued, and held up before its wait
        assert holder.release() is Released.HANDED_OFF
        other = Lock(r, "res", lease=5, blocking_timeout=10)
        fence = other.acquire()  # once the claim lapsed
        assert fence is not None
        go.set()
        wait_until(lambda: r.llen(resource_keys("res")[2]) == 1, "the waiter queued again")
        assert not got  # it holds nothing while another does
        other.release()
        thread.join(10)
        assert got and got[0] > fence
        waiter.check()
    finally:
        go.set()
        thread.join(10)
    assert waiter.release() is Released.RELEASED
