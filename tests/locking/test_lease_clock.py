"""The lease arithmetic under a fake clock: no sleeping, no timing luck.

The lock talks to a real Redis; only time is simulated. The watchdog is left
out (``renew=False``) and its callback, ``_renew_due``, is called by hand.
"""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from locking import CountingMetrics, Lock, LockLost, Released
from tests.clocks import Clock


def test_renewal_is_due_every_third_of_the_lease_and_extends_it(r):
    clock = Clock()
    lock = Lock(r, "res", lease=30, renew=False, clock=clock)
    lock.acquire()
    clock.now += 10
    assert lock._renew_due() == clock.now + 10
    assert lock._lease_ends == clock.now + 30
    assert 29_000 < r.pttl(lock.key) <= 30_000


def test_max_hold_stops_renewal_and_the_lease_then_ends(r):
    clock = Clock()
    metrics = CountingMetrics()
    lock = Lock(r, "res", lease=30, max_hold=60, renew=False, clock=clock, metrics=metrics)
    lock.acquire()
    clock.now += 50
    assert lock._renew_due() == clock.now + 10  # still renewing
    clock.now += 15  # held 65 s > max_hold
    due = lock._renew_due()
    assert due == lock._lease_ends  # no renewal: wait for the lease to end
    assert not lock.lost.is_set()
    clock.now = due
    assert lock._renew_due() is None
    assert lock.lost.is_set() and "max_hold" in lock.lost_reason
    assert metrics.counts["renewed"] == 1


def test_transport_errors_are_retried_until_the_lease_would_end(r):
    clock = Clock()
    metrics = CountingMetrics()
    lock = Lock(r, "res", lease=30, renew=False, clock=clock, metrics=metrics)
    lock.acquire()
    # Renewals from now on go to a server that does not answer (a real refused connection).
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    lock._renew_in_redis = lambda token: bool(lock._renew_script((lock.key,), (token, lock.lease_ms), client=dead))
    clock.now += 10
    retry_at = lock._renew_due()
    assert retry_at == clock.now + 3  # lease / 10
    assert metrics.counts["renewal_failed"] == 1 and not lock.lost.is_set()
    clock.now += 21  # past the lease end counted from the last good renewal
    assert lock._renew_due() is None
    assert lock.lost.is_set() and "could not renew" in lock.lost_reason
    assert lock.release() is Released.RELEASED  # Redis still had it: released cleanly


def test_a_renewal_that_meets_its_holders_release_marks_nothing_lost(r):
    """The watchdog took the lock's token, then its holder released it: the renewal finds the
    key gone, and the holding was not lost but ended."""
    clock = Clock()
    metrics = CountingMetrics()
    lock = Lock(r, "res", lease=30, renew=False, clock=clock, metrics=metrics)
    lock.acquire()
    renew = lock._renew_in_redis

    def released_meanwhile(token: str) -> bool:
        assert lock.release() is Released.RELEASED
        return renew(token)

    lock._renew_in_redis = released_meanwhile
    clock.now += 10
    assert lock._renew_due() is None
    assert not lock.lost.is_set() and "lost" not in metrics.counts


def test_check_says_lost_once_the_lease_ran_out_unrenewed(r):
    """The watchdog held up (or renewal off): no renewal marked the holding lost, but its lease,
    counted from before the call that took it, has run out, and the key may be another's."""
    clock = Clock()
    lock = Lock(r, "res", lease=30, renew=False, clock=clock)
    lock.acquire()
    clock.now += 29.9
    lock.check()
    clock.now += 0.1
    with pytest.raises(LockLost, match="ran out"):
        lock.check()
    clock.now += 5
    assert lock._renew_due() == clock.now + 10  # a renewal that comes after all extends it
    lock.check()
