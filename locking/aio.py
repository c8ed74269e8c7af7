"""The safe lock for asyncio, on the same Lua scripts as :class:`locking.Lock`.

Ownership belongs to the task that acquired: the token lives in a context
variable together with that task, so another task sharing the lock object can
neither see nor release it. Each held lock renews its lease from a small task
of its own, which release cancels, also when the holder leaves its block by an
exception or by cancellation. Acquire in the task that will hold the lock: bound the
wait with ``blocking_timeout`` (or ``asyncio.timeout``), not ``asyncio.wait_for``, which
before Python 3.12 runs the acquire in a task of its own. A task that ends still holding
the lock has it released by the renewing task at its next renewal, and marked lost: no
one else could release it, and the lease would have been renewed for ``max_hold``.
"""

from __future__ import annotations

import asyncio
import contextvars
import secrets
import time
from dataclasses import dataclass, field
from types import TracebackType

from redis.asyncio import Redis
from redis.exceptions import RedisError

from . import scripts
from .errors import LockError, LockLost, LockNotOwned, LockTimeout
from .lease import DEFAULT_LEASE, DEFAULT_MAX_HOLD, Released
from .lock import resource_keys
from .metrics import LockMetrics, observer


@dataclass
class _Holding:
    token: str
    fence: int
    task: asyncio.Task | None
    acquired_at: float
    depth: int = 1
    renewal: asyncio.Task | None = None
    lost_reason: str | None = None
    lost: asyncio.Event = field(default_factory=asyncio.Event)


class AsyncLock:
    """An asyncio distributed lock. Arguments as for :class:`locking.Lock`, with a
    ``redis.asyncio.Redis`` client; ``on_lost(lock, reason)`` is called in the loop."""

    def __init__(
        self,
        client: Redis,
        name: str,
        *,
        lease: float = DEFAULT_LEASE,
        renew: bool = True,
        max_hold: float = DEFAULT_MAX_HOLD,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        reentrant: bool = False,
        on_lost=None,
        metrics: LockMetrics | None = None,
        key_prefix: str = "",
    ) -> None:
        if lease <= 0:
            raise ValueError("lease must be positive")
        self.client = client
        self.name = name
        self.lease = lease
        self.lease_ms = int(lease * 1000)
        self.renew = renew
        self.max_hold = max_hold
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.reentrant = reentrant
        self.on_lost = on_lost
        self.metrics = observer() if metrics is None else metrics
        self.key, self.fence_key, self.queue_key, self.wake_prefix = resource_keys(name, key_prefix)
        self._keys = (self.key, self.fence_key, self.queue_key)
        self._acquire_script = client.register_script(scripts.ACQUIRE)
        self._release_script = client.register_script(scripts.RELEASE)
        self._renew_script = client.register_script(scripts.RENEW)
        self._holding: contextvars.ContextVar[_Holding | None] = contextvars.ContextVar(
            f"lock:{name}:{id(self)}", default=None
        )

    def _mine(self) -> _Holding | None:
        holding = self._holding.get()
        if holding is None or holding.task is not asyncio.current_task():
            return None
        return holding

    @property
    def fence(self) -> int:
        holding = self._mine()
        return holding.fence if holding else 0

    @property
    def lost(self) -> bool:
        holding = self._mine()
        return bool(holding and holding.lost.is_set())

    async def acquire(self, blocking: bool | None = None, blocking_timeout: float | None = None) -> int | None:
        """Take the lock for the current task; return its fence, or None."""
        holding = self._mine()
        if holding is not None:
            if not self.reentrant:
                raise LockError(f"{self.name!r} is already held by this task; pass reentrant=True to nest")
            holding.depth += 1
            return holding.fence
        blocking = self.blocking if blocking is None else blocking
        timeout = self.blocking_timeout if blocking_timeout is None else blocking_timeout
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        token = secrets.token_hex(16)
        entry = f"{token}:{self.lease_ms}" if blocking else ""
        wake_key = self.wake_prefix + token
        queued = contended = False
        try:
            while True:
                taken, value = await self._acquire_script(
                    (*self._keys, wake_key), (token, self.lease_ms, entry, "0" if queued else "1")
                )
                if taken:
                    fence = value
                    break
                contended = True
                if not blocking:
                    self.metrics.refused(self.name, wait=time.monotonic() - started)
                    return None
                queued = True
                wait = min(value, self.lease_ms // 3) / 1000 if value > 0 else 0.005  # as Lock's
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        await self._give_up(token, entry, wake_key)
                        self.metrics.refused(self.name, wait=time.monotonic() - started)
                        return None
                    wait = min(wait, left)
                # A hand-off wakes it: its claim is taken up for the lease by the next ACQUIRE.
                await self.client.blpop([wake_key], timeout=max(wait, 0.001))
        except BaseException:
            # Cancelled while queued, or the wait ended in an error (the connection's timeout):
            # leave the queue, passing on a lock handed to us meanwhile. Left in it, the entry
            # would be handed the lock at the next release, and everyone behind would wait out
            # its lease with no one holding.
            try:
                await asyncio.shield(self._give_up(token, entry, wake_key))
            except RedisError:
                pass  # Redis out of reach: the entry's lease bounds the harm; the first error says why
            raise
        holding = _Holding(token=token, fence=fence, task=asyncio.current_task(), acquired_at=time.monotonic())
        if self.renew:
            holding.renewal = asyncio.create_task(self._renew_loop(holding), name=f"renew {self.name}")
        self._holding.set(holding)
        self.metrics.acquired(self.name, wait=time.monotonic() - started, contended=contended)
        return fence

    async def _give_up(self, token: str, entry: str, wake_key: str) -> None:
        if entry:
            await self._release_script(self._keys, (token, self.wake_prefix, entry))
        await self.client.delete(wake_key)

    def _mark_lost(self, holding: _Holding, reason: str) -> None:
        if holding.lost.is_set():
            return
        holding.lost_reason = reason
        holding.lost.set()
        self.metrics.lost(self.name, reason=reason)
        if self.on_lost is not None:
            self.on_lost(self, reason)

    async def _renew_loop(self, holding: _Holding) -> None:
        lease_ends = holding.acquired_at + self.lease
        pause = self.lease / 3
        while True:
            await asyncio.sleep(pause)
            now = time.monotonic()
            if holding.task is not None and holding.task.done():
                await self._abandoned(holding)
                return
            if now - holding.acquired_at >= self.max_hold:
                await asyncio.sleep(max(0.0, lease_ends - now))
                self._mark_lost(holding, f"held longer than max_hold={self.max_hold}s; the lease was not renewed")
                return
            try:
                renewed = await self._renew_script((self.key,), (holding.token, self.lease_ms))
            except RedisError as error:
                self.metrics.renewal_failed(self.name, error=error)
                if time.monotonic() >= lease_ends:
                    self._mark_lost(holding, f"could not renew before the lease ended: {error!r}")
                    return
                pause = min(self.lease / 10, max(0.0, lease_ends - time.monotonic()))
                continue
            if not renewed:
                self._mark_lost(holding, "the key expired or another holder has it")
                return
            lease_ends, pause = now + self.lease, self.lease / 3
            self.metrics.renewed(self.name)

    async def _abandoned(self, holding: _Holding) -> None:
        """The task that acquired ended holding the lock: released (handed on), and marked lost."""
        holding.renewal = None  # this very task: not cancelled by the release
        try:
            await self._release_in_redis(holding)
        except RedisError:
            pass  # the lease ends it
        self._mark_lost(holding, "the task that acquired it ended without releasing it")

    def check(self) -> None:
        holding = self._mine()
        if holding is None:
            raise LockNotOwned(f"{self.name!r} is not held by this task")
        if holding.lost.is_set():
            raise LockLost(f"lost {self.name!r}: {holding.lost_reason}")

    async def release(self) -> Released:
        """Release the current task's hold; NOT_HELD when it holds nothing.

        On a transport error the hold is kept, so calling ``release`` again can succeed.
        """
        holding = self._mine()
        if holding is None:
            return Released.NOT_HELD
        if holding.depth > 1:
            holding.depth -= 1
            return Released.RELEASED
        outcome = await self._release_in_redis(holding)
        self._holding.set(None)
        return outcome

    async def _release_in_redis(self, holding: _Holding) -> Released:
        if holding.renewal is not None:
            holding.renewal.cancel()
        result = await self._release_script(self._keys, (holding.token, self.wake_prefix, ""))
        self.metrics.released(self.name, held=time.monotonic() - holding.acquired_at)
        if result == 0:
            self._mark_lost(holding, "the lease had expired before release")
            return Released.EXPIRED
        return Released.HANDED_OFF if result == 2 else Released.RELEASED

    async def __aenter__(self) -> AsyncLock:
        if await self.acquire() is None:
            raise LockTimeout(f"could not acquire {self.name!r}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        holding = self._mine()
        if holding is None:
            return
        if holding.depth > 1:
            holding.depth -= 1
            return
        was_lost = holding.lost.is_set()
        # Shielded: a holder cancelled in its block still releases (and hands on) the lock.
        outcome = await asyncio.shield(self._release_in_redis(holding))
        self._holding.set(None)
        if exc_type is None and (was_lost or outcome is Released.EXPIRED):
            raise LockLost(f"lost {self.name!r} while holding it: {holding.lost_reason}")
