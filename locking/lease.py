"""What every lock of this library shares once it is held: the lease, its renewal
by the per-process watchdog, the lost-lease signal, fork safety, reentrancy and
release. Subclasses say how to acquire, renew and release in Redis."""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable
from enum import Enum
from types import TracebackType

from redis.exceptions import RedisError

from .errors import LockError, LockLost, LockNotOwned, LockTimeout
from .metrics import LockMetrics, observer
from .watchdog import watchdog

DEFAULT_LEASE = 10.0
DEFAULT_MAX_HOLD = 300.0


class Released(Enum):
    RELEASED = "released"  # the key was deleted
    HANDED_OFF = "handed_off"  # the first waiter holds it now
    EXPIRED = "expired"  # it was no longer ours: the lease had run out (or been taken)
    NOT_HELD = "not_held"  # nothing to release: already released, or never acquired


class LeasedLock:
    """Base of :class:`~locking.Lock` and :class:`~locking.MultiLock`.

    Args:
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
            when the lease is lost while held. The watchdog renews, calls ``on_lost``
            and reports to ``metrics`` in the context (``contextvars``) of the code that
            acquired the lock, so a hook that reads a contextvar (a request's id for a log
            line) finds the acquirer's value.
        metrics: a :class:`~locking.metrics.LockMetrics` receiving every event; by
            default the process's, installed with :func:`locking.metrics.observe`.
        clock: a monotonic clock, replaceable in tests.
    """

    # How much sooner than this process counts a lease the servers' clocks may end it
    # (Redlock's allowance for drift between its servers); 0 for one server.
    clock_drift = 0.0

    def __init__(
        self,
        *,
        label: str,
        lease: float = DEFAULT_LEASE,
        renew: bool = True,
        max_hold: float = DEFAULT_MAX_HOLD,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        reentrant: bool = False,
        on_lost: Callable[[LeasedLock, str], None] | None = None,
        metrics: LockMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if lease <= 0:
            raise ValueError("lease must be positive")
        self.label = label
        self.lease = lease
        self.lease_ms = int(lease * 1000)
        self.renew = renew
        self.max_hold = max_hold
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.reentrant = reentrant
        self.on_lost = on_lost
        # Read once here, not per event: a lock's hooks stay those it was created with.
        self.metrics = observer() if metrics is None else metrics
        self.clock = clock
        self._state = threading.Lock()
        self._token: str | None = None
        self._owner: int | None = None
        self._pid = 0
        self._depth = 0
        self._acquired_at = 0.0
        self._lease_ends = 0.0
        self._ticket: int | None = None
        self._context: contextvars.Context | None = None
        self.lost = threading.Event()
        self.lost_reason: str | None = None

    # -- what subclasses provide -------------------------------------------------------------------

    def _renew_in_redis(self, token: str) -> bool:
        raise NotImplementedError

    def _release_in_redis(self, token: str) -> Released:
        raise NotImplementedError

    def acquire(self, blocking: bool | None = None, blocking_timeout: float | None = None):
        raise NotImplementedError

    # -- acquiring ---------------------------------------------------------------------------------

    def _nested(self) -> bool:
        """True when the holding thread acquires again and the lock is reentrant. Another
        thread of this process may not acquire an object that is held: its holding would
        replace the holder's (a token, a fence, a lease), and the holder's release end it."""
        if self._token is None or self._pid != os.getpid():
            return False
        if self._owner != threading.get_ident():
            raise LockError(f"{self.label!r} is held by another thread; give each thread a lock object of its own")
        if not self.reentrant:
            raise LockError(f"{self.label!r} is already held by this thread; pass reentrant=True to nest")
        self._depth += 1
        return True

    def _wait_plan(self, blocking: bool | None, blocking_timeout: float | None) -> tuple[bool, float, float | None]:
        """``(blocking, started, deadline)`` for one acquire: the call's arguments, else the
        lock's own; ``deadline`` is None when waiting has no limit."""
        blocking = self.blocking if blocking is None else blocking
        timeout = self.blocking_timeout if blocking_timeout is None else blocking_timeout
        started = self.clock()
        return blocking, started, None if timeout is None else started + timeout

    def _took(self, token: str, now: float, *, lease_ends: float | None = None) -> None:
        """Record a successful acquisition made at ``now`` and start renewing it. ``lease_ends``:
        when the lease may end at the earliest (the call that took it started a lease before);
        by default a lease from ``now``."""
        # No lock needed: the watchdog sees this holding only once watch() returns.
        self._token, self._owner, self._pid = token, threading.get_ident(), os.getpid()
        self._depth = 1
        self._acquired_at = now
        self._lease_ends = now + self.lease if lease_ends is None else lease_ends
        if self.lost.is_set():
            self.lost.clear()
            self.lost_reason = None
        if self.renew:
            self._context = contextvars.copy_context()
            self._ticket = watchdog().watch(self, now + self.lease / 3)

    # -- holding -----------------------------------------------------------------------------------

    def check(self) -> None:
        """Raise LockLost if the lease was lost, or may have been: its end, counted from before
        the call that took or last renewed it, has passed (the watchdog did not renew it in
        time: held up, or ``renew=False``); LockNotOwned if this process does not hold the lock."""
        self._require_owner()
        if self.lost.is_set():
            raise LockLost(f"lost {self.label!r}: {self.lost_reason}")
        if self.clock() >= self._lease_ends:
            raise LockLost(f"lost {self.label!r}: its lease ran out before it was renewed")

    def _require_owner(self) -> None:
        if self._token is None:
            raise LockNotOwned(f"{self.label!r} is not held")
        if self._pid != os.getpid():
            raise LockNotOwned(f"{self.label!r} is held by the parent process, not this forked child")

    def _mark_lost(self, reason: str) -> None:
        with self._state:
            if self.lost.is_set():
                return
            self.lost_reason = reason
            self.lost.set()
        self.metrics.lost(self.label, reason=reason)
        if self.on_lost is not None:
            self.on_lost(self, reason)

    def _lost_quietly(self, reason: str) -> None:
        """Called by the watchdog when a hook failed during a renewal: the holding is marked
        lost (``check()`` raises) without calling the hooks again."""
        with self._state:
            if not self.lost.is_set():
                self.lost_reason = reason
                self.lost.set()

    def _renew_due(self) -> float | None:
        """Called by the watchdog: renew, and say when next, in the acquirer's context."""
        context = self._context
        return self._renew_now() if context is None else context.run(self._renew_now)

    def _renew_now(self) -> float | None:
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
            renewed = self._renew_in_redis(token)
        except RedisError as error:
            self.metrics.renewal_failed(self.label, error=error)
            if self.clock() >= self._lease_ends:
                self._mark_lost(f"could not renew before the lease ended: {error!r}")
                return None
            return min(self.clock() + self.lease / 10, self._lease_ends)
        if not renewed:
            if self._token != token or (self.renew and self._ticket is None):
                # Its holder released it meanwhile (the watch is dropped before the release's
                # call to Redis): nothing was lost.
                return None
            self._mark_lost("the key expired or another holder has it")
            return None
        # Counted from before the call: the local deadline never outlives the key.
        self._lease_ends = now + self.lease - self.clock_drift
        self.metrics.renewed(self.label)
        return now + self.lease / 3

    # -- releasing ---------------------------------------------------------------------------------

    def release(self) -> Released:
        """Release the lock. Idempotent: releasing again returns NOT_HELD.

        On a transport error the token is kept, so calling ``release`` again can
        still succeed; if it never does, the keys expire with the lease.
        Raises LockNotOwned in a forked child that did not acquire the lock.
        """
        token = self._token
        if token is None:
            return Released.NOT_HELD
        self._require_owner()
        if self._depth > 1:
            self._depth -= 1
            return Released.RELEASED
        if self._ticket is not None:
            watchdog().forget(self._ticket)
            self._ticket = None
            self._context = None
        result = self._release_in_redis(token)
        held = self.clock() - self._acquired_at
        self._token, self._owner, self._depth = None, None, 0
        self.metrics.released(self.label, held=held)
        if result is Released.EXPIRED:
            self._mark_lost("the lease had expired before release")
        return result

    def __enter__(self):
        if self.acquire() is None:
            raise LockTimeout(f"could not acquire {self.label!r}")
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
            raise LockLost(f"lost {self.label!r} while holding it: {self.lost_reason}")
