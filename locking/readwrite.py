"""What the two sides of a read-write lock share: a resource's keys, the fence, and the wait.

A resource is held either by up to ``limit`` shared holders at once
(:class:`~locking.shared.SharedLock`) or by one exclusive holder
(:class:`~locking.exclusive.ExclusiveLock`), never both. Every holding has a lease of its
own, renewed by the watchdog as a :class:`~locking.Lock`'s is: a shared holder that dies
drops out when its lease ends, without anyone releasing it.

**An exclusive caller is not starved.** While it waits it keeps a flag up (it expires
``WAITING_FLAG_MS`` after the caller last asked, should it die waiting), and no new shared
holding is taken while the flag stands: the exclusive caller waits for the shared holders of
the moment to leave, not for a stream of new ones (writer preference). Shared callers wait
meanwhile; an exclusive caller that gives up lowers its flag.

Waiters poll, with a jittered back-off from 1 ms to 50 ms capped by what Redis says the
obstacle has left (the lease of the holder in the way), as :class:`~locking.MultiLock`'s do:
a shared holding has no single successor to hand the resource to.

Fences count every holding, shared or exclusive, from one counter: an exclusive holder's
fence is larger than that of every holding before it. Shared holders are not ordered among
themselves (they hold together).

The keys are not those of a :class:`~locking.Lock` of the same name: the two do not
exclude each other.
"""

from __future__ import annotations

import random
import secrets
import time

from redis import Redis

from .lease import LeasedLock

# How long a waiting exclusive caller's flag stands after its last attempt: it tries again
# within 50 ms while it waits, so the flag lapses only when the caller stopped (died).
WAITING_FLAG_MS = 2000


def readwrite_keys(name: str, key_prefix: str = "") -> tuple[str, str, str, str]:
    """The exclusive key, the shared holders' set, the waiting flag and the fence counter of
    ``name``, in one hash slot, each starting with ``key_prefix``."""
    base = f"{key_prefix}rwlock:{{{name}}}"
    return f"{base}:exclusive", f"{base}:shared", f"{base}:waiting", f"{base}:fence"


class ReadWriteSide(LeasedLock):
    """Base of :class:`~locking.shared.SharedLock` and :class:`~locking.exclusive.ExclusiveLock`:
    one attempt per round trip (``_attempt``), repeated until taken or the wait is over.

    Args:
        client: a redis-py ``Redis`` client (or a cluster client: every key shares a slot).
        name: the resource, such as ``"reservations:42"``.
        key_prefix: put before every key, outside the hash tag.
        **options: lease, renew, max_hold, blocking, blocking_timeout, reentrant, on_lost,
            metrics, clock: see :class:`~locking.lease.LeasedLock`.
    """

    def __init__(self, client: Redis, name: str, *, key_prefix: str = "", **options) -> None:
        super().__init__(label=name, **options)
        self.client = client
        self.name = name
        self.exclusive_key, self.shared_key, self.waiting_key, self.fence_key = readwrite_keys(name, key_prefix)
        self._fence = 0

    @property
    def fence(self) -> int:
        """The fencing token of the current holding (see the module's note on ordering)."""
        return self._fence

    def _attempt(self, token: str, *, waiting: bool) -> tuple[int, int]:
        """One try: ``(fence, 0)`` when taken, else ``(0, ms the obstacle has left)``.
        ``waiting``: the caller will try again if refused."""
        raise NotImplementedError

    def _give_up(self, token: str) -> None:
        """The caller stops waiting (refused, or out of time)."""

    def acquire(self, blocking: bool | None = None, blocking_timeout: float | None = None) -> int | None:
        """Take the holding; its fence, or None when refused (fail-fast) or out of time."""
        if self._nested():
            return self._fence
        blocking, started, deadline = self._wait_plan(blocking, blocking_timeout)
        token = secrets.token_hex(16)
        backoff = 0.001
        contended = False
        while True:
            asked = self.clock()  # a lease taken by this attempt starts after this
            fence, busy_ms = self._attempt(token, waiting=blocking)
            if fence:
                break
            contended = True
            left = None if deadline is None else deadline - self.clock()
            if not blocking or (left is not None and left <= 0):
                self._give_up(token)
                self.metrics.refused(self.label, wait=self.clock() - started)
                return None
            pause = random.uniform(backoff / 2, backoff)
            if busy_ms >= 0:
                pause = min(pause, max(busy_ms / 1000, 0.001))
            time.sleep(pause if left is None else min(pause, left))
            backoff = min(backoff * 2, 0.05)
        self._fence = fence
        now = self.clock()
        self._took(token, now, lease_ends=asked + self.lease)
        self.metrics.acquired(self.label, wait=now - started, contended=contended)
        return fence
