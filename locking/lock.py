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
  the first waiter (the key now holds its token for a claim, and its wake key is
  pushed to), whose next ACQUIRE takes the claim up for its lease and counts its
  fence; otherwise the key is deleted. Waiters are served in arrival order, so a
  releaser that comes straight back queues behind them.
- A waiter that gives up, or whose wait ends in an error (its connection's timeout, a
  signal), removes itself from the queue in the same script that passes the lock on if
  it had just been handed it. A waiter killed outright (SIGKILL) cannot: the next
  release hands the lock to its entry, but a hand-off holds the key for a claim
  (``scripts.CLAIM``: a second, or a third of the lease and half a second) until the
  waiter takes it up for its lease, so the dead entry holds the lock unused for that
  claim, not for a lease.
- A holder that dies without releasing leaves a key that expires with its lease;
  waiters block no longer than the holder's remaining lease, nor a third of their own, before
  retrying.
"""

from __future__ import annotations

import secrets

from redis import Redis
from redis.exceptions import NoScriptError, RedisError

from . import scripts, wire
from .lease import LeasedLock, Released
from .watchdog import renewal_client


def resource_keys(name: str, key_prefix: str = "") -> tuple[str, str, str, str]:
    """The lock key, fence counter, waiter queue and wake-key prefix of ``name``, in one hash
    slot, each starting with ``key_prefix`` (an application's namespace on a shared Redis)."""
    base = f"{key_prefix}lock:{{{name}}}"
    return base, f"{base}:fence", f"{base}:queue", f"{base}:wake:"


class Lock(LeasedLock):
    """A distributed mutual-exclusion lock on one Redis server.

    Args:
        client: a redis-py ``Redis`` client. Its errors are never swallowed; it
            must not have a ``socket_timeout`` shorter than ``blocking_timeout``.
        name: the resource, such as ``"stock:42"``. All keys derive from it.
        key_prefix: put before every key (``<key_prefix>lock:{stock:42}``), outside the
            hash tag; logs and metrics name the lock by ``name`` alone.
        fenced: False for a fail-fast lock whose holders write nothing a fence would guard
            (a guard of a rule): it takes the key with a plain ``SET NX PX`` and counts no
            fence (its acquire answers 0). A fence counter never expires, since fences must
            never go back: one per name of a lock that guards, say, each user of each item
            would keep a key for every buyer a site ever had.
        **options: lease, renew, max_hold, blocking, blocking_timeout, reentrant,
            on_lost, metrics, clock: see :class:`~locking.lease.LeasedLock`.
    """

    def __init__(self, client: Redis, name: str, *, key_prefix: str = "", fenced: bool = True, **options) -> None:
        super().__init__(label=name, **options)
        self.fenced = fenced
        self.client = client
        self.name = name
        self.key, self.fence_key, self.queue_key, self.wake_prefix = resource_keys(name, key_prefix)
        self._keys = (self.key, self.fence_key, self.queue_key)
        self._acquire_script = client.register_script(scripts.ACQUIRE)
        self._release_script = client.register_script(scripts.RELEASE)
        self._renew_script = client.register_script(scripts.RENEW)
        self._raise_script = client.register_script(scripts.RAISE_FENCE)
        self._fence = 0
        self._fast_path = isinstance(client, Redis)

    @property
    def fence(self) -> int:
        """The fencing token of the current acquisition: larger than every earlier one for this
        name; 0 for an unfenced lock (``fenced=False``), which counts none."""
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
        if self._nested():
            return self._fence
        blocking, started, deadline = self._wait_plan(blocking, blocking_timeout)
        if blocking and not self.fenced:
            raise ValueError("an unfenced lock is fail-fast: it never queues (blocking=False)")
        token = secrets.token_hex(16)
        entry = f"{token}:{self.lease_ms}" if blocking else ""
        wake_key = self.wake_prefix + token
        direct = self._fast_path or not self.fenced  # no script to take a free key
        asked = self.clock()  # a lease taken by the next call starts after this
        fence = self._set_and_count(token) if direct else None
        if fence is None and direct and not blocking:
            self.metrics.refused(self.name, wait=self.clock() - started)
            return None
        contended = False
        try:
            if fence is None:
                fence, contended, asked = self._wait_for(token, entry, wake_key, blocking, deadline)
        except BaseException:
            # Ended while queued (the connection's timeout, a signal, the worker's own time
            # limit): left in the queue, the entry would be handed the lock at the next
            # release, and everyone behind it would wait out its lease with no one holding.
            if blocking:
                try:
                    self._give_up(token, entry, wake_key)
                except RedisError:
                    pass  # Redis out of reach: the entry's lease bounds the harm; the first error says why
            raise
        if fence is None:
            self.metrics.refused(self.name, wait=self.clock() - started)
            return None
        self._fence = fence
        now = self.clock()
        self._took(token, now, lease_ends=asked + self.lease)
        self.metrics.acquired(self.name, wait=now - started, contended=contended)
        return fence

    def _wait_for(
        self, token: str, entry: str, wake_key: str, blocking: bool, deadline: float | None
    ) -> tuple[int | None, bool, float]:
        """The fence once the lock is ours (None when refused, fail-fast, or timed out),
        whether it was held by another when first asked, and when the call that gave it to us
        started (its lease starts after).

        A lock handed over is held for a claim (``scripts.CLAIM``) until the ACQUIRE after the
        wake takes it up for the lease: only then is it ours, and its lease counted, from
        before the wait. A claim that lapsed first (the waiter was held up) is another's or
        free: that ACQUIRE takes it or queues the waiter again."""
        queued = contended = False
        answer = None
        while True:
            if answer is None:
                asked = self.clock()
                answer = self._acquire(token, entry, wake_key, queued)
            taken, value = answer
            if taken:
                return value, contended, asked
            contended = True
            if not blocking:
                return None, contended, asked
            queued = True
            # The holder's remaining lease caps the wait, and so does a third of ours: the lease
            # taken at the wake is counted from the wait's start, and a claim (longer) lapses
            # with no release to wake us should the lock be handed to a waiter ahead that died.
            wait = min(value, self.lease_ms // 3) / 1000 if value > 0 else 0.005
            if deadline is not None:
                left = deadline - self.clock()
                if left <= 0:
                    self._give_up(token, entry, wake_key)
                    return None, contended, asked
                wait = min(wait, left)
            asked = self.clock()
            answer = self._wait_then_acquire(token, entry, wake_key, max(wait, 0.001))

    def _acquire(self, token: str, entry: str, wake_key: str, queued: bool) -> list:
        """One ACQUIRE; never sent twice (redis-py retries a call cut off, and a second run
        of a busy attempt would queue the caller twice: its first release would hand the
        lock to its own stale entry, and everyone wait out a lease)."""
        args = (token, self.lease_ms, entry, "0" if queued else "1")
        if self._fast_path:
            return wire.evalsha(self.client, self._acquire_script, (*self._keys, wake_key), args)
        return self._acquire_script((*self._keys, wake_key), args)

    def _wait_then_acquire(self, token: str, entry: str, wake_key: str, wait: float) -> list:
        """Wait up to ``wait`` seconds on the wake key (a hand-off pushes to it), then ACQUIRE
        (the caller queued): the ACQUIRE's answer. In one write where the client allows it:
        Redis runs the ACQUIRE as the wait ends, so a hand-off's claim is taken up at once, with
        no round trip between, and a wait that ended empty costs none more either."""
        if not self._fast_path:
            self.client.blpop([wake_key], timeout=wait)
            return self._acquire(token, entry, wake_key, True)
        keys, args = (*self._keys, wake_key), (token, self.lease_ms, entry, "0")
        acquire = ("EVALSHA", self._acquire_script.sha, len(keys), *keys, *args)
        _, answer = wire.call_each(self.client, ("BLPOP", wake_key, wait), acquire)
        if isinstance(answer, NoScriptError):  # the server lost the script: it did not run
            return self._acquire(token, entry, wake_key, True)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def raise_fence(self, floor: int) -> int | None:
        """Move this resource's fence counter past ``floor`` while the lock is held, and take
        the new value as this holding's fence; None when the lock is not ours in Redis.

        For a Redis that lost the counter (restarted empty): its fences start again from 1,
        below those already written, and every fenced write would be refused as stale.
        """
        token = self._token
        if token is None:
            return None
        fence = self._raise_script((self.key, self.fence_key), (token, floor))
        if not fence:
            return None
        self._fence = int(fence)
        return self._fence

    def _set_and_count(self, token: str) -> int | None:
        """The uncontended path: ``SET NX PX`` and ``INCR`` of the fence, pipelined in one
        round trip with no script. Returns the fence, or None when the lock is busy.

        Redis runs the two back to back, and the INCR happens while we hold the key
        (its lease is seconds long), so the fence still orders holders. A busy
        attempt burns a fence number, which is harmless: fences may skip numbers,
        never repeat or go back. An unfenced lock sets the key alone: its fence is 0.
        """
        if not self.fenced:
            command = ("SET", self.key, token, "NX", "PX", self.lease_ms)
            taken = wire.call(self.client, command)[0] if self._fast_path else self.client.execute_command(*command)
            return 0 if taken else None
        taken, fence = wire.call(
            self.client, ("SET", self.key, token, "NX", "PX", self.lease_ms), ("INCR", self.fence_key)
        )
        return fence if taken else None

    def _give_up(self, token: str, entry: str, wake_key: str) -> None:
        """Leave the queue; a lock handed to us in the meantime is passed on in the same script."""
        self._release_script(self._keys, (token, self.wake_prefix, entry))
        self.client.delete(wake_key)

    def _renew_in_redis(self, token: str) -> bool:
        return bool(
            self._renew_script((self.key,), (token, self.lease_ms), client=renewal_client(self.client, self.lease))
        )

    def _release_in_redis(self, token: str) -> Released:
        if self._fast_path:
            result = wire.evalsha(self.client, self._release_script, self._keys, (token, self.wake_prefix, ""))
        else:
            result = self._release_script(self._keys, (token, self.wake_prefix, ""))
        return (Released.EXPIRED, Released.RELEASED, Released.HANDED_OFF)[result]
