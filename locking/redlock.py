"""Redlock: one lock over N independent Redis servers, held while a majority agrees.

Acquisition asks every server at once (from one thread pool per process) to set
the key with the lease. The lock is held when a majority said yes and time is
left: ``validity = lease - elapsed - drift``, with ``drift = lease * 1% + 2 ms``
for clock-rate differences between the servers. Otherwise it is released
everywhere at once and, when blocking, tried again after a jittered pause.

Fences: each server counts acquisitions; the lock's fence is one more than the
largest count in the quorum, written back to the quorum before it is used. Any
later quorum overlaps this one in at least one server, so its fence is larger.

Renewal (the watchdog) and release go to every server; renewal succeeds while a
majority still holds the token.

Servers out of reach: with a minority down the lock works on the others. Every call goes to
all servers at once and is answered as soon as the answers in decide it (a majority
granted, renewed or released, or too many refused for one): a server that hangs (stopped,
its packets dropped) is not waited for while a majority answers, and its call ends in the
pool at its client's socket timeout (``locking.integration.redlock_redis``: a tenth of the
lease). Each attempt to acquire has a token of its own, so that the release of a failed
attempt, reaching a slow server late, never removes a later attempt's key. With a
majority down no attempt can succeed, so ``acquire`` raises ``redis.ConnectionError``
at its first attempt, as :class:`~locking.Lock` does when its one server is down,
instead of answering "busy" (None) or retrying until ``blocking_timeout``: the caller
learns that the servers, not another holder, stand in the way.
"""

from __future__ import annotations

import os
import random
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from . import scripts
from .lease import LeasedLock, Released
from .lock import resource_keys

CLOCK_DRIFT_FACTOR = 0.01
CLOCK_DRIFT_FLOOR = 0.002

_pool: ThreadPoolExecutor | None = None
_pool_guard = threading.Lock()
# Calls to one server in the pool at once, at most: past it a call answers None at once, as
# from a server that failed. A hung server's calls each hold a thread for its clients' socket
# timeout; unbounded, they filled the pool, and every call to the other servers (the
# watchdog's renewals too) queued behind them.
IN_FLIGHT_MOST = 12
_in_flight: dict[int, int] = {}  # by the id of the server's client
_in_flight_guard = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_guard:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="redlock")
        return _pool


def _reset_after_fork() -> None:
    global _pool, _pool_guard, _in_flight, _in_flight_guard
    _pool, _pool_guard = None, threading.Lock()
    _in_flight, _in_flight_guard = {}, threading.Lock()


def _submit(call: Callable[[int], object], client: Redis, i: int) -> Future:
    """``call(i)`` in the pool, its answer None on a failure, or at once when ``client``'s
    server has ``IN_FLIGHT_MOST`` calls in the pool already."""
    key = id(client)
    with _in_flight_guard:
        if _in_flight.get(key, 0) >= IN_FLIGHT_MOST:
            refused: Future = Future()
            refused.set_result(None)
            return refused
        _in_flight[key] = _in_flight.get(key, 0) + 1
    future = _executor().submit(_answer_of, call, i)
    future.add_done_callback(lambda _done: _call_ended(key))
    return future


def _call_ended(key: int) -> None:
    with _in_flight_guard:
        _in_flight[key] -= 1


os.register_at_fork(after_in_child=_reset_after_fork)


class Redlock(LeasedLock):
    """A lock held by a majority of ``clients``, each an independent Redis server.

    Args:
        clients: redis-py clients, one per server (3 or 5 is usual).
        name: the resource; keys (and ``key_prefix``) as for :class:`~locking.Lock`.
        retry_delay: the mean pause between attempts while blocking, jittered.
        **options: lease, renew, max_hold, blocking, blocking_timeout, reentrant,
            on_lost, metrics, clock: see :class:`~locking.lease.LeasedLock`.
    """

    def __init__(
        self, clients: list[Redis], name: str, *, retry_delay: float = 0.02, key_prefix: str = "", **options
    ) -> None:
        if not clients:
            raise ValueError("Redlock needs at least one server")
        super().__init__(label=name, **options)
        self.clients = list(clients)
        self.name = name
        self.quorum = len(self.clients) // 2 + 1
        self.retry_delay = retry_delay
        self.key, self.fence_key, _, _ = resource_keys(name, key_prefix)
        self._acquire = [c.register_script(scripts.REDLOCK_ACQUIRE) for c in self.clients]
        self._raise = [c.register_script(scripts.REDLOCK_RAISE_FENCE) for c in self.clients]
        self._release = [c.register_script(scripts.REDLOCK_RELEASE) for c in self.clients]
        self._renew = [c.register_script(scripts.RENEW) for c in self.clients]
        self._raise_held = [c.register_script(scripts.REDLOCK_RAISE_HELD_FENCE) for c in self.clients]
        self._fence = 0
        self.validity = 0.0
        self._valid_until = 0.0
        self.clock_drift = self.lease * CLOCK_DRIFT_FACTOR + CLOCK_DRIFT_FLOOR
        self._late: dict = {}  # the holding's acquires that had not answered when a majority had

    @property
    def fence(self) -> int:
        """The fencing token of the current acquisition: larger than every earlier one for this name."""
        return self._fence

    def _on_quorum(self, call, indexes=None) -> tuple[dict[int, object], dict]:
        """Run ``call(i)`` on every server (of ``indexes``) at once, and return the answers as
        soon as they decide a majority: yes from a quorum, or no (a falsy answer, or None for a
        server that failed) from more than the rest can outweigh. Servers that have not
        answered then are left out; their calls end in the pool (the second value: each call's
        future, by server)."""
        indexes = list(range(len(self.clients)) if indexes is None else indexes)
        needed = min(self.quorum, len(indexes))
        answers: dict[int, object] = {}
        pending = {_submit(call, self.clients[i], i): i for i in indexes}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                answers[pending.pop(future)] = future.result()
            yes = sum(1 for answer in answers.values() if answer)
            if yes >= needed or len(answers) - yes > len(indexes) - needed:
                break
        return answers, pending

    def _undo(self, token: str, granted: list[int], late: dict, *, wait_all: bool = False) -> None:
        """Release a failed attempt everywhere: waited for on the servers that granted it (they
        answer); on a server that has not answered yet, sent once its acquire ends, so that it
        comes after it (waited for too with ``wait_all``: a majority failed, and the caller is
        told so; its time matters less than a key left behind)."""
        release = lambda i: self._release[i]((self.key,), (token,))  # noqa: E731
        waited = [_submit(release, self.clients[i], i) for i in granted]
        self._after_each(late, release)
        wait(waited)
        if wait_all:
            wait(late)
            for i in late.values():
                _answer_of(release, i)

    def _after_each(self, late: dict, call) -> None:
        """``call(i)`` on each server of ``late`` once its call there has ended, never before it."""
        for future, i in late.items():
            future.add_done_callback(lambda _done, i=i: _submit(call, self.clients[i], i))

    def _try_once(self, token: str) -> bool:
        started = self.clock()
        counts, late = self._on_quorum(lambda i: self._acquire[i]((self.key, self.fence_key), (token, self.lease_ms)))
        granted = [i for i, count in counts.items() if count]
        failed = sum(1 for count in counts.values() if count is None)
        if failed > len(self.clients) - self.quorum:
            # No majority can agree, however long one waits: undo what the others granted
            # and say so, rather than "busy".
            self._undo(token, granted, late, wait_all=True)
            raise RedisConnectionError(
                f"only {len(self.clients) - failed} of {len(self.clients)} Redlock servers answered; "
                f"{self.quorum} are needed"
            )
        drift = self.clock_drift
        if len(granted) >= self.quorum:
            fence = max(counts[i] for i in granted) + 1
            raised, _ = self._on_quorum(lambda i: self._raise[i]((self.fence_key,), (fence,)), granted)
            decided = self.clock()
            validity = self.lease - (decided - started) - drift
            if sum(1 for ok in raised.values() if ok) >= self.quorum and validity > 0:
                self._fence, self.validity, self._late = fence, validity, late
                self._valid_until = decided + validity
                return True
        self._undo(token, granted, late)
        return False

    def raise_fence(self, floor: int) -> int | None:
        """Move the fence counters past ``floor`` on a majority that still holds the lock,
        and take ``floor + 1`` as this holding's fence; None when no majority holds it (see
        :meth:`locking.Lock.raise_fence`)."""
        token = self._token
        if token is None:
            return None
        fence = max(floor, self._fence) + 1
        raised, _ = self._on_quorum(lambda i: self._raise_held[i]((self.key, self.fence_key), (token, fence)))
        if sum(1 for ok in raised.values() if ok) < self.quorum:
            return None
        self._fence = fence
        return fence

    def acquire(self, blocking: bool | None = None, blocking_timeout: float | None = None) -> int | None:
        """Take the lock on a majority; return its fence, or None when busy or timed out.
        Raises ``redis.ConnectionError`` when fewer than a majority of the servers answer."""
        if self._nested():
            return self._fence
        blocking, started, deadline = self._wait_plan(blocking, blocking_timeout)
        contended = False
        while not self._try_once(token := secrets.token_hex(16)):
            contended = True
            left = None if deadline is None else deadline - self.clock()
            if not blocking or (left is not None and left <= 0):
                self.metrics.refused(self.name, wait=self.clock() - started)
                return None
            pause = random.uniform(0, 2 * self.retry_delay)
            time.sleep(pause if left is None else min(pause, left))
        now = self.clock()
        self._took(token, now, lease_ends=self._valid_until)
        self.metrics.acquired(self.name, wait=now - started, contended=contended)
        return self._fence

    def _renew_in_redis(self, token: str) -> bool:
        answers, _ = self._on_quorum(lambda i: self._renew[i]((self.key,), (token, self.lease_ms)))
        renewed = sum(1 for ok in answers.values() if ok)
        if renewed >= self.quorum:
            return True
        unknown = len(self.clients) - len(answers) + list(answers.values()).count(None)
        if renewed + unknown >= self.quorum:
            # Servers that did not answer might still hold it: retry until the lease would end.
            raise RedisError(f"only {renewed} of {len(self.clients)} servers renewed; the others did not answer")
        return False

    def _release_in_redis(self, token: str) -> Released:
        release = lambda i: self._release[i]((self.key,), (token,))  # noqa: E731
        # A server whose acquire had not answered when the majority did may still run it: its
        # release goes once that acquire has ended, never before it (which would leave its key
        # there a lease long, and a few such left no majority to be had).
        late, self._late = self._late, {}
        self._after_each(late, release)
        rest = [i for i in range(len(self.clients)) if i not in late.values()]
        released, _ = self._on_quorum(release, rest)
        return Released.RELEASED if sum(1 for ok in released.values() if ok) >= self.quorum else Released.EXPIRED


def _answer_of(call: Callable[[int], object], i: int) -> object:
    """``call(i)``'s answer, None for a server that failed."""
    try:
        return call(i)
    except (RedisError, OSError):
        return None
