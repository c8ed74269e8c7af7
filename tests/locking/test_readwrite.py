"""The read-write lock: up to N shared holders or one exclusive, each with a lease, across
real processes; an exclusive caller that waits is not starved by a stream of shared ones."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
import redis

from locking import ExclusiveLock, Released, SharedLock
from tests.clocks import Clock

from ..waiting import wait_until
from .conftest import LOCK_TEST_DB

pytestmark = pytest.mark.live

fork = multiprocessing.get_context("fork")


def client() -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=6379, db=LOCK_TEST_DB)


def test_up_to_the_limit_share_and_the_next_is_refused(r):
    holders = [SharedLock(r, "res", limit=3, blocking=False) for _ in range(4)]
    assert [bool(one.acquire()) for one in holders] == [True, True, True, False]
    assert holders[0].holders() == (3, False)
    holders[0].release()
    assert holders[3].acquire()  # a place came free


def test_an_exclusive_holder_excludes_shared_ones_and_shared_ones_exclude_it(r):
    shared = SharedLock(r, "res", limit=2, blocking=False)
    exclusive = ExclusiveLock(r, "res", blocking=False)
    assert shared.acquire()
    assert exclusive.acquire() is None
    assert not r.exists(exclusive.waiting_key)  # a fail-fast caller holds back nobody
    assert shared.release() is Released.RELEASED
    assert exclusive.acquire()
    assert SharedLock(r, "res", limit=2, blocking=False).acquire() is None
    assert ExclusiveLock(r, "res", blocking=False).acquire() is None
    assert exclusive.release() is Released.RELEASED
    assert shared.acquire()


def test_every_holding_takes_a_larger_fence(r):
    shared = SharedLock(r, "res", limit=2, blocking=False)
    first = shared.acquire()
    shared.release()
    exclusive = ExclusiveLock(r, "res", blocking=False)
    assert exclusive.acquire() > first


def test_a_waiting_exclusive_caller_holds_back_new_shared_holders(r):
    """Writer preference: once an exclusive caller waits, the holders of the moment finish
    and no new one starts, so a busy resource cannot starve it."""
    early = SharedLock(r, "res", limit=4)
    assert early.acquire()
    waiter = ExclusiveLock(r, "res", blocking_timeout=0.05)
    assert waiter.acquire() is None  # timed out: its flag goes with it
    assert not r.exists(waiter.waiting_key)
    assert SharedLock(r, "res", limit=4, blocking=False).acquire()  # nobody waits: shared is fine

    # Now a caller that waits as long as it takes, in a process of its own.
    got = fork.Event()

    def exclusive() -> None:
        with ExclusiveLock(client(), "res", blocking_timeout=30):
            got.set()

    writer = fork.Process(target=exclusive)
    writer.start()
    wait_until(lambda: r.exists(waiter.waiting_key), "the exclusive caller's flag")
    assert SharedLock(r, "res", limit=4, blocking=False).acquire() is None  # held back
    assert not got.is_set()
    r.delete(waiter.shared_key)  # the holders of the moment leave
    assert got.wait(10), "the exclusive caller never got in"
    writer.join(10)
    assert SharedLock(r, "res", limit=4, blocking=False).acquire()


def test_a_shared_holders_lease_is_renewed_and_lost_once_it_ends(r):
    clock = Clock()
    holder = SharedLock(r, "res", limit=2, lease=30, renew=False, clock=clock)
    assert holder.acquire()
    clock.now += 10
    assert holder._renew_due() == clock.now + 10
    end = r.zscore(holder.shared_key, holder._token)
    assert end - time.time() * 1000 > 29_000  # its lease, by Redis' clock, counted anew
    r.zadd(holder.shared_key, {holder._token: 1})  # as if its lease had ended in Redis
    assert holder._renew_due() is None
    assert holder.lost.is_set()
    assert holder.release() is Released.EXPIRED


def _hold(side: str, lease: float, ready) -> None:
    lock = (
        SharedLock(client(), "res", limit=2, lease=lease)
        if side == "shared"
        else ExclusiveLock(client(), "res", lease=lease)
    )
    lock.acquire()
    ready.set()
    time.sleep(60)


@pytest.mark.parametrize("side", ["shared", "exclusive"])
def test_a_holder_killed_frees_the_resource_within_one_lease(r, side):
    lease = 1.0
    ready = fork.Event()
    holder = fork.Process(target=_hold, args=(side, lease, ready))
    holder.start()
    assert ready.wait(10)
    time.sleep(lease)  # renewed by its watchdog meanwhile: still held
    other = (
        ExclusiveLock(r, "res", blocking=False) if side == "shared" else SharedLock(r, "res", limit=2, blocking=False)
    )
    assert other.acquire() is None
    os.kill(holder.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    holder.join()
    other.blocking_timeout = lease * 3
    assert other.acquire(blocking=True) is not None
    assert time.monotonic() - killed_at <= lease + 0.5
    other.release()


def _work(index: int, until: float, log: Path, start) -> None:
    """Shared holdings mostly, an exclusive one every fifth: each logged with its side."""
    connection = client()
    start.wait()
    n = 0
    with log.open("a") as out:
        while time.time() < until:
            n += 1
            exclusive = (n + index) % 5 == 0
            lock = ExclusiveLock(connection, "hot", lease=2, blocking_timeout=30)
            if not exclusive:
                lock = SharedLock(connection, "hot", limit=3, lease=2, blocking_timeout=30)
            with lock:
                entered = time.monotonic_ns()
                time.sleep(0.002)
                left = time.monotonic_ns()
            out.write(f"{'x' if exclusive else 's'} {entered} {left}\n")
            out.flush()


def test_many_processes_never_overlap_an_exclusive_holding_nor_exceed_the_limit(r, tmp_path):
    processes, seconds = 12, 4
    start = fork.Barrier(processes)
    until = time.time() + seconds + 2
    workers = [fork.Process(target=_work, args=(n, until, tmp_path / f"log-{n}", start)) for n in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 60)
    assert [w.exitcode for w in workers] == [0] * processes
    holdings = [
        (side, int(entered), int(left))
        for n in range(processes)
        for side, entered, left in (line.split() for line in (tmp_path / f"log-{n}").read_text().splitlines())
    ]
    exclusive = [h for h in holdings if h[0] == "x"]
    shared = [h for h in holdings if h[0] == "s"]
    assert len(exclusive) > processes and len(shared) > processes  # both sides ran, every process got in
    for _, entered, left in exclusive:
        others = [h for h in holdings if h[1] < left and entered < h[2]]
        assert len(others) == 1, "an exclusive holding overlapped another holding"
    # Shared holdings: at no entry were more than 3 inside, and at some more than one.
    inside = [sum(1 for _, since, until in shared if since <= entered < until) for _, entered, _ in shared]
    assert max(inside) <= 3
    assert max(inside) > 1, "shared holders never held together"
    print(f"\n{len(shared)} shared and {len(exclusive)} exclusive holdings by {processes} processes")
