"""The asyncio lock against a real Redis."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from locking import LockLost, Released
from locking.aio import AsyncLock
from locking.lock import resource_keys

from .conftest import LOCK_TEST_DB


def run(coroutine_function):
    async def main():
        client = Redis(host="127.0.0.1", port=6379, db=LOCK_TEST_DB)
        try:
            return await coroutine_function(client)
        finally:
            await client.aclose()

    return asyncio.run(main())


def test_acquire_hand_off_and_release(r):
    async def scenario(client):
        holder = AsyncLock(client, "res")
        assert await holder.acquire() == 1
        order = []

        async def waiter(n):
            async with AsyncLock(client, "res", blocking_timeout=5):
                order.append(n)

        tasks = [asyncio.create_task(waiter(n)) for n in range(3)]
        while await client.llen(resource_keys("res")[2]) < 3:
            await asyncio.sleep(0.005)
        assert await holder.release() is Released.HANDED_OFF
        await asyncio.gather(*tasks)
        return order

    assert sorted(run(scenario)) == [0, 1, 2]
    assert not r.exists(resource_keys("res")[0])


def test_another_task_cannot_release_the_holders_lock(r):
    async def scenario(client):
        lock = AsyncLock(client, "res")
        await lock.acquire()
        other = await asyncio.create_task(lock.release())  # a different task, same lock object
        mine = await lock.release()
        return other, mine

    assert run(scenario) == (Released.NOT_HELD, Released.RELEASED)


def test_watchdog_keeps_the_lock_for_three_leases(r):
    async def scenario(client):
        async with AsyncLock(client, "res", lease=0.3) as lock:
            await asyncio.sleep(0.9)
            lock.check()
            return await client.pttl(resource_keys("res")[0])

    assert run(scenario) > 0


def test_renewal_stops_on_exception_and_on_cancellation(r):
    async def scenario(client):
        before = len(asyncio.all_tasks())
        with pytest.raises(RuntimeError):
            async with AsyncLock(client, "a", lease=0.3):
                raise RuntimeError
        started = asyncio.Event()

        async def holder():
            async with AsyncLock(client, "b", lease=0.3):
                started.set()
                await asyncio.sleep(60)

        task = asyncio.create_task(holder())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.05)
        return before, len(asyncio.all_tasks())

    before, after = run(scenario)
    assert after == before  # no renewal task left behind
    assert not r.exists(resource_keys("a")[0]) and not r.exists(resource_keys("b")[0])


def test_a_cancelled_waiter_leaves_the_queue(r):
    async def scenario(client):
        holder = AsyncLock(client, "res")
        await holder.acquire()
        task = asyncio.create_task(AsyncLock(client, "res").acquire())
        while await client.llen(resource_keys("res")[2]) < 1:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await client.llen(resource_keys("res")[2]), await holder.release()

    assert run(scenario) == (0, Released.RELEASED)


def test_a_lost_lease_is_raised_at_block_exit(r):
    async def scenario(client):
        async with AsyncLock(client, "res", lease=0.2, renew=False):
            await asyncio.sleep(0.3)

    with pytest.raises(LockLost):
        run(scenario)
