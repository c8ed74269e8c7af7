"""The safe lock: leases with watchdog renewal, hand-off without polling, fencing.

Usage::

    lock = Lock(redis_client, "stock:42")
    with lock:                      # blocks until acquired (or LockTimeout)
        write(fence=lock.fence)     # the fence orders every holder of "stock:42"
                                    # LockLost is raised here if the lease was lost

How it works, in one round trip each way:

- acquire runs ACQUIRE: ``SET`` the key to a 128-bit random token with a lease
  and ``INCR`` the resource's fence counter. When the lock is busy a waiter
  appends itself to the resource's queue and blocks on its own wake key
  (``BLPOP``); it is never polling.
- release runs RELEASE: when someone is queued, the lock is handed straight to
  the first waiter (the key now holds its token and lease, its fence is pushed to
  its wake key); otherwise the key is deleted. Waiters are served in arrival
  order, so a releaser that comes straight back queues behind them.
- A waiter that gives up removes itself from the queue in the same script that
  passes the lock on if it had just been handed it: nothing is stranded.
- A holder that dies without releasing leaves a key that expires with its lease;
  waiters block no longer than the holder's remaining lease before retrying.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable
from enum import Enum
from types import TracebackType

from redis import Redis
from redis.exceptions import RedisError

from . import scripts
from .errors import LockError, LockLost, LockNotOwned, LockTimeout
from .metrics import NO_METRICS, LockMetrics
from .watchdog import watchdog

DEFAULT_LEASE = 10.0
DEFAULT_MAX_HOLD = 300.0


class Released(Enum):
    RELEASED = "released"  # the key was deleted
    HANDED_OFF = "handed_off"  # the first waiter holds it now
    EXPIRED = "expired"  # it was no longer ours: the lease had run out (or been taken)
    NOT_HELD = "not_held"  # nothing to release: already released, or never acquired


def resource_keys(name: str) -> tuple[str, str, str, str]:
    """The lock key, fence counter, waiter queue and wake-key prefix of ``name``, in one hash slot."""
    base = f"lock:{{{name}}}"
    return base, f"{base}:fence", f"{base}:queue", f"{base}:wake:"


class Lock:
    """A distributed mutual-exclusion lock on one Redis server.

    Args:
        client: a redis-py ``Redis`` client. Its errors are never swallowed; it
            must not have a ``socket_timeout`` shorter than ``blocking_timeout``.
        name: the resource, such as ``"stock:42"``. All keys derive from it.
        lease: seconds the lock lives without renewal (a crashed holder frees it
            after at most this long).
        renew: keep the lease alive from the per-process watchdog every
            ``lease / 3`` while held.
        max_hold: stop renewing after this many seconds held; the lock then
            expires and the holder is told it lost it.
        blocking: wait for the lock (default) or fail fast.
        blocking_timeout: seconds to wait at most; None waits until acquired.
        reentrant: let the thread that holds the lock acquire it again (a hold
            count); otherwise a second acquire by the holder raises LockError.
        on_lost: called once, from the watchdog thread, with ``(lock, reason)``
            when the lease is lost while held.
        metrics: a :class:`~locking.metrics.LockMetrics` receiving every event.
        clock: a monotonic clock, replaceable in tests.
    """

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
        on_lost: Callable[[Lock, str], None] | None = None,
        metrics: LockMetrics = NO_METRICS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if lease <= 0:
            raise ValueError("lease must be positive")
        self.client = client
        self.name = name
        self.lease = lease
        self.renew = renew
        self.max_hold = max_hold
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.reentrant = reentrant
        self.on_lost = on_lost
        self.metrics = metrics
        self.clock = clock
        self.key, self.fence_key, self.queue_key, self.wake_prefix = resource_keys(name)
        self._acquire_script = client.register_script(scripts.ACQUIRE)
        self._release_script = client.register_script(scripts.RELEASE)
        self._renew_script = client.register_script(scripts.RENEW)
        self._state = threading.Lock()
        self._token: str | None = None
        self._fence = 0
        self._owner: int | None = None
        self._pid = 0
        self._depth = 0
        self._acquired_at = 0.0
        self._lease_ends = 0.0
        self._ticket: int | None = None
        self.lost = threading.Event()
        self.lost_reason: str | None = None

    # -- acquiring ---------------------------------------------------------------------------------

    @property
    def fence(self) -> int:
        """The fencing token of the current acquisition: larger than every earlier one for this name."""
        return self._fence

    def locked(self) -> bool:
        """Whether anyone holds the lock in Redis."""
        return bool(self.client.exists(self.key))

    def owned(self) -> bool:
        """Whether this lock object holds the lock in Redis right now."""
        token = self._token
        return token is not None and self.client.get(self.key) in (token, token.encode())

    def acquire(self, blocking: bool | None = None, blocking_timeout: float | None = None) -> int | None:
        """Take the lock; return its fence, or None when busy (fail-fast) or timed out."""
        blocking = self.blocking if blocking is None else blocking
        timeout = self.blocking_timeout if blocking_timeout is None else blocking_timeout
        me = threading.get_ident()
        if self._token is not None and self._pid == os.getpid():
            if self._owner == me and self.reentrant:
                self._depth += 1
                return self._fence
            if self._owner == me:
                raise LockError(f"{self.name!r} is already held by this thread; pass reentrant=True to nest")
        started = self.clock()
        deadline = None if timeout is None else started + timeout
        token = secrets.token_hex(16)
        lease_ms = int(self.lease * 1000)
        entry = f"{token}:{lease_ms}" if blocking else ""
        keys = (self.key, self.fence_key, self.queue_key)
        queued = False
        contended = False
        wake_key = self.wake_prefix + token
        while True:
            taken, value = self._acquire_script(keys, (token, lease_ms, entry, "0" if queued else "1"))
            if taken:
                fence = value or self._pop_handed_fence(wake_key)
                break
            contended = True
            if not blocking:
                self.metrics.refused(self.name, wait=self.clock() - started)
                return None
            queued = True
            wait = value / 1000 if value > 0 else 0.005  # the holder's remaining lease caps the wait
            if deadline is not None:
                left = deadline - self.clock()
                if left <= 0:
                    self._give_up(token, entry, wake_key)
                    self.metrics.refused(self.name, wait=self.clock() - started)
                    return None
                wait = min(wait, left)
            popped = self.client.blpop([wake_key], timeout=max(wait, 0.001))
            if popped is not None:
                fence = int(popped[1])
                break
        self._took(token, fence, me)
        self.metrics.acquired(self.name, wait=self.clock() - started, contended=contended)
        return fence

    def _pop_handed_fence(self, wake_key: str) -> int:
        # ACQUIRE found the key already ours: a release handed it to us between two calls.
        handed = self.client.lpop(wake_key)
        return int(handed) if handed is not None else 0

    def _give_up(self, token: str, entry: str, wake_key: str) -> None:
        """Leave the queue; a lock handed to us in the meantime is passed on in the same script."""
        self._release_script((self.key, self.fence_key, self.queue_key), (token, self.wake_prefix, entry))
        self.client.delete(wake_key)

    def _took(self, token: str, fence: int, owner: int) -> None:
        now = self.clock()
        with self._state:
            self._token, self._fence, self._owner, self._pid = token, fence, owner, os.getpid()
            self._depth = 1
            self._acquired_at = now
            self._lease_ends = now + self.lease
            self.lost.clear()
            self.lost_reason = None
            if self.renew:
                self._ticket = watchdog().watch(self, now + self.lease / 3)

    # -- holding -----------------------------------------------------------------------------------

    def check(self) -> None:
        """Raise LockLost if the lease was lost; LockNotOwned if this process does not hold the lock."""
        self._require_owner()
        if self.lost.is_set():
            raise LockLost(f"lost {self.name!r}: {self.lost_reason}")

    def _require_owner(self) -> None:
        if self._token is None:
            raise LockNotOwned(f"{self.name!r} is not held")
        if self._pid != os.getpid():
            raise LockNotOwned(f"{self.name!r} is held by the parent process, not this forked child")

    def _mark_lost(self, reason: str) -> None:
        with self._state:
            if self.lost.is_set():
                return
            self.lost_reason = reason
            self.lost.set()
        self.metrics.lost(self.name, reason=reason)
        if self.on_lost is not None:
            self.on_lost(self, reason)

    def _renew_due(self) -> float | None:
        """Called by the watchdog: renew, and say when next."""
        token = self._token
        if token is None or self._pid != os.getpid():
            return None
        now = self.clock()
        if now - self._acquired_at >= self.max_hold:
            if now >= self._lease_ends:
                self._mark_lost(f"held longer than max_hold={self.max_hold}s; the lease was not renewed")
                return None
            return self._lease_ends
        try:
            renewed = self._renew_script((self.key,), (token, int(self.lease * 1000)))
        except RedisError as error:
            self.metrics.renewal_failed(self.name, error=error)
            if self.clock() >= self._lease_ends:
                self._mark_lost(f"could not renew before the lease ended: {error!r}")
                return None
            return min(self.clock() + self.lease / 10, self._lease_ends)
        if not renewed:
            self._mark_lost("the key expired or another holder has it")
            return None
        self._lease_ends = now + self.lease
        self.metrics.renewed(self.name)
        return now + self.lease / 3

    # -- releasing ---------------------------------------------------------------------------------

    def release(self) -> Released:
        """Release (or hand on) the lock. Idempotent: releasing again returns NOT_HELD.

        On a transport error the token is kept, so calling ``release`` again can
        still succeed; if it never does, the key expires with its lease.
        Raises LockNotOwned in a forked child that did not acquire the lock.
        """
        if self._token is None:
            return Released.NOT_HELD
        self._require_owner()
        if self._depth > 1:
            self._depth -= 1
            return Released.RELEASED
        with self._state:
            if self._ticket is not None:
                watchdog().forget(self._ticket)
                self._ticket = None
        result = self._release_script((self.key, self.fence_key, self.queue_key), (self._token, self.wake_prefix, ""))
        held = self.clock() - self._acquired_at
        self._token, self._owner, self._depth = None, None, 0
        self.metrics.released(self.name, held=held)
        if result == 0:
            self._mark_lost("the lease had expired before release")
            return Released.EXPIRED
        return Released.HANDED_OFF if result == 2 else Released.RELEASED

    def __enter__(self) -> Lock:
        if self.acquire() is None:
            raise LockTimeout(f"could not acquire {self.name!r}")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        was_lost = self.lost.is_set()
        outcome = self.release()
        if exc_type is None and (was_lost or outcome is Released.EXPIRED):
            raise LockLost(f"lost {self.name!r} while holding it: {self.lost_reason}")
