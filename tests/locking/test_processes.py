"""The lock across real processes: overlap, crashes, pauses and forks."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import redis

from locking import Lock, LockNotOwned, Released, StaleFence
from locking.lock import resource_keys
from tests.stock import stock_left, stock_row
from tests.waiting import wait_until

from .conftest import LOCK_TEST_DB

pytestmark = pytest.mark.live

fork = multiprocessing.get_context("fork")


def client() -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=6379, db=LOCK_TEST_DB)


def _contend(name: str, until: float, counter: Path, log: Path, start) -> None:
    lock = Lock(client(), name, lease=2, blocking_timeout=30)
    start.wait()
    with log.open("a") as out:
        while time.time() < until:
            with lock:
                entered = time.monotonic_ns()
                # A deliberately unsafe read-modify-write: any overlap loses an increment.
                value = int(counter.read_text())
                counter.write_text(str(value + 1))
                left = time.monotonic_ns()
            out.write(f"{entered} {left}\n")
            out.flush()


def test_no_two_of_64_processes_ever_hold_the_lock_at_once(r, tmp_path):
    processes, seconds = 64, 10
    counter = tmp_path / "counter"
    counter.write_text("0")
    start = fork.Barrier(processes)
    until = time.time() + seconds + 3  # the barrier needs a moment for 64 forks
    workers = [
        fork.Process(target=_contend, args=("hot", until, counter, tmp_path / f"log-{n}", start))
        for n in range(processes)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 60)
    assert [w.exitcode for w in workers] == [0] * processes
    intervals = sorted(
        tuple(map(int, line.split()))
        for n in range(processes)
        for line in (tmp_path / f"log-{n}").read_text().split("\n")
        if line
    )
    # The independent checker: the critical sections, ordered by entry, never overlap...
    for (_, left), (entered, _) in zip(intervals, intervals[1:], strict=False):
        assert entered >= left, "two holders overlapped"
    # ...and the unprotected counter lost no increment.
    assert int(counter.read_text()) == len(intervals)
    assert len(intervals) > processes  # it really ran, and every process got in
    print(f"\n{len(intervals)} critical sections by {processes} processes, none overlapping")


def _hold_forever(name: str, lease: float, ready) -> None:
    Lock(client(), name, lease=lease).acquire()
    ready.set()
    time.sleep(60)


def test_sigkill_of_the_holder_frees_the_lock_within_one_lease(r):
    lease = 1.0
    ready = fork.Event()
    holder = fork.Process(target=_hold_forever, args=("res", lease, ready))
    holder.start()
    assert ready.wait(10)
    time.sleep(lease)  # the watchdog has renewed it meanwhile
    assert Lock(r, "res", blocking=False).acquire() is None
    os.kill(holder.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    holder.join()
    waiter = Lock(r, "res", blocking_timeout=lease * 2)
    assert waiter.acquire() is not None
    assert time.monotonic() - killed_at <= lease + 0.5
    waiter.release()


def test_a_forked_child_cannot_release_or_renew_the_parents_lock(r):
    lock = Lock(r, "res", lease=0.5)
    lock.acquire()
    result = fork.Queue()

    def child() -> None:
        from locking.watchdog import watchdog

        try:
            lock.release()
            result.put("released")
        except LockNotOwned:
            result.put(("refused", len(watchdog())))

    process = fork.Process(target=child)
    process.start()
    process.join(10)
    assert result.get(timeout=5) == ("refused", 0)  # and the child's watchdog renews nothing
    time.sleep(1.0)  # two leases: still held, renewed by the parent alone
    assert lock.owned()
    assert lock.release() is Released.RELEASED


@pytest.mark.django_db(transaction=True)
def test_a_paused_holder_loses_the_lock_and_its_fenced_write_is_refused(r, make_voucher):
    from django.db import connections

    from inventory.models import Stock
    from locking import CountingMetrics
    from locking.integration import FencedUpdate, fenced_update

    voucher = make_voucher(stock=10)
    metrics = CountingMetrics()
    lease = 0.5
    acquired, go, report = fork.Event(), fork.Event(), fork.Queue()

    def paused_holder() -> None:
        write = FencedUpdate(Stock.objects.filter(pk=stock_row(voucher)), quantity=0)  # prepared, as the strategy does
        lock = Lock(client(), "stock", lease=lease, metrics=metrics)
        lock.acquire()
        acquired.set()
        go.wait(30)  # SIGSTOPped in here, past the lease
        outcome = {"lost": lock.lost.is_set(), "reason": lock.lost_reason}
        try:
            write.run(lock)
            outcome["write"] = "applied"
        except StaleFence:
            outcome["write"] = "refused"
        outcome["stale_fence_metric"] = metrics.counts.get("stale_fence", 0)
        report.put(outcome)
        connections.close_all()

    connections.close_all()
    holder = fork.Process(target=paused_holder)
    holder.start()
    assert acquired.wait(10)
    os.kill(holder.pid, signal.SIGSTOP)
    time.sleep(lease * 3)
    newer = Lock(r, "stock")
    assert newer.acquire() is not None  # the paused holder's lease ran out
    fenced_update(Stock.objects.filter(pk=stock_row(voucher)), lock=newer, quantity=9)
    os.kill(holder.pid, signal.SIGCONT)
    time.sleep(0.3)  # the holder's watchdog wakes, fails to renew, and says so
    go.set()
    outcome = report.get(timeout=10)
    holder.join(10)
    newer.release()
    assert outcome["lost"], outcome
    assert outcome["write"] == "refused"
    assert outcome["stale_fence_metric"] == 1
    assert stock_left(voucher) == 9
    assert not r.exists(resource_keys("stock")[0])


def _wait_for(name: str, lease: float) -> None:
    Lock(client(), name, lease=lease, blocking_timeout=60).acquire()


def test_a_sigkilled_waiter_holds_the_lock_handed_to_it_for_a_claim_not_a_lease(r):
    """A waiter killed outright (a task's hard time limit) leaves its entry in the queue, and
    the release hands the lock to it. The hand-off's claim lapses unused (a third of the lease and half a second), and
    the waiter behind it takes the lock then, not a lease (12 s) later."""
    lease, queue = 12, resource_keys("res")[2]
    holder = Lock(r, "res", lease=lease)
    holder.acquire()
    doomed = fork.Process(target=_wait_for, args=("res", lease))
    doomed.start()
    wait_until(lambda: r.llen(queue) == 1, "the doomed waiter queued")
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(10)
    got = []
    behind = Lock(r, "res", lease=lease, blocking_timeout=30)
    thread = threading.Thread(target=lambda: got.append(behind.acquire()))
    thread.start()
    wait_until(lambda: r.llen(queue) == 2, "the next waiter queued behind it")
    released_at = time.monotonic()
    assert holder.release() is Released.HANDED_OFF  # to the dead entry
    thread.join(30)
    assert got and got[0] is not None
    assert time.monotonic() - released_at < lease * 0.6  # the claim: a third of the lease and half a second
    assert behind.release() is Released.RELEASED
