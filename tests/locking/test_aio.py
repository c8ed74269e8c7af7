"""The asyncio lock against a real Redis."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis
from redis.exceptions import TimeoutError as RedisTimeoutError

from locking import Lock, LockLost, Released
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


def test_a_waiter_whose_wait_ends_in_an_error_leaves_the_queue(r):
    """Its connection's timeout ends the wait (the holder's lease is longer): left in the queue,
    the entry would be handed the lock at the release, and the next caller would wait a lease."""

    async def scenario(client):
        holder = AsyncLock(client, "res", lease=10)
        await holder.acquire()
        impatient = Redis(host="127.0.0.1", port=6379, db=LOCK_TEST_DB, socket_timeout=0.2)
        try:
            with pytest.raises(RedisTimeoutError):
                await AsyncLock(impatient, "res", blocking_timeout=5).acquire()
        finally:
            await impatient.aclose()
        return await client.llen(resource_keys("res")[2]), await holder.release()

    assert run(scenario) == (0, Released.RELEASED)


def test_a_task_that_ends_holding_the_lock_has_it_released_at_the_next_renewal(r):
    """No other task can release it: renewed on, it would be held for max_hold (300 s)."""

    async def scenario(client):
        lock = AsyncLock(client, "res", lease=0.3)
        await asyncio.create_task(lock.acquire())  # acquired in a task that then ends
        gone = asyncio.get_running_loop().time() + 5
        while await client.exists(resource_keys("res")[0]):
            assert asyncio.get_running_loop().time() < gone, "still held"
            await asyncio.sleep(0.02)
        return await AsyncLock(client, "res", blocking=False).acquire()

    assert run(scenario) is not None


def test_a_key_prefix_names_the_same_keys_as_the_sync_locks(r):
    async def scenario(client):
        lock = AsyncLock(client, "res", key_prefix="ns:")
        await lock.acquire()
        held = Lock(r, "res", key_prefix="ns:", blocking=False).acquire()
        await lock.release()
        return lock.key, held

    assert run(scenario) == (resource_keys("res", "ns:")[0], None)


class _WaitSentTwice(Redis):
    """A client that sends a wait again after its answer was lost, as a retry does: the first
    wait popped the hand-off's wake, and the caller sees only the second's, empty."""

    async def blpop(self, *args, **kwargs):
        if await super().blpop(*args, **kwargs) is not None:
            return await super().blpop(*args, **kwargs)
        return None


def test_a_waiter_whose_wake_was_lost_still_takes_the_lock_with_a_newer_fence(r):
    async def scenario(client):
        holder = AsyncLock(client, "res", lease=5)
        held = await holder.acquire()
        resent = _WaitSentTwice(host="127.0.0.1", port=6379, db=LOCK_TEST_DB, socket_timeout=10)
        try:
            waiter = asyncio.create_task(AsyncLock(resent, "res", lease=5, blocking_timeout=5).acquire())
            while await client.llen(resource_keys("res")[2]) < 1:
                await asyncio.sleep(0.005)
            await holder.release()
            return held, await waiter
        finally:
            await resent.aclose()

    held, taken = run(scenario)
    assert taken is not None and taken > held
