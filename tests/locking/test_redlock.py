"""Redlock over three real, independent Redis servers."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from locking import Released
from locking.redlock import Redlock
from tests.waiting import wait_until

pytestmark = pytest.mark.live


@pytest.fixture
def clients(redlock_urls):
    made = [redis.Redis.from_url(url, socket_connect_timeout=0.2, socket_timeout=0.5) for url in redlock_urls]
    yield made
    for client in made:
        client.close()


def holders(clients, name="res") -> int:
    key = f"lock:{{{name}}}"
    count = 0
    for client in clients:
        try:
            count += bool(client.exists(key))
        except redis.ConnectionError:
            pass
    return count


def test_acquires_on_every_server_and_releases_on_all(clients):
    lock = Redlock(clients, "res")
    assert lock.acquire() is not None
    assert holders(clients) == 3
    assert 0 < lock.validity <= lock.lease
    assert lock.release() is Released.RELEASED
    assert holders(clients) == 0


def test_a_second_holder_is_refused_while_a_majority_holds(clients):
    first, second = Redlock(clients, "res"), Redlock(clients, "res", blocking=False)
    first.acquire()
    assert second.acquire() is None
    # The refused attempt left nothing behind, took nothing of the first's; the first answered
    # on its majority, and its third server's key may land a moment later.
    wait_until(lambda: holders(clients) == 3, "the first holder on every server")
    first.release()
    assert second.acquire() is not None
    second.release()


def test_fences_increase_across_quorums_that_differ(clients, redlock_servers):
    lock = Redlock(clients, "res")
    fences = [lock.acquire()]
    lock.release()
    redlock_servers[0].stop()  # the next quorum is servers 1 and 2 only
    fences.append(lock.acquire())
    lock.release()
    redlock_servers[0].start()
    redlock_servers[2].stop()  # and then servers 0 and 1; server 0 had missed one acquisition
    fences.append(lock.acquire())
    lock.release()
    assert fences == sorted(fences) and len(set(fences)) == 3


def test_works_with_one_server_stopped(clients, redlock_servers):
    redlock_servers[1].stop()
    lock = Redlock(clients, "res", lease=0.6)
    assert lock.acquire() is not None
    time.sleep(1.0)  # renewed by the two that answer
    lock.check()
    assert lock.release() is Released.RELEASED


@pytest.mark.parametrize("blocking", [True, False])
def test_with_two_servers_stopped_it_says_they_are_out_of_reach_at_once(blocking, clients, redlock_servers):
    # Not "busy" (None), and not after waiting out blocking_timeout: no majority can be
    # had until the servers are back, and the caller answers 503, not 409.
    redlock_servers[0].stop()
    redlock_servers[1].stop()
    lock = Redlock(clients, "res", blocking=blocking, blocking_timeout=30)
    with pytest.raises(redis.ConnectionError, match="only 1 of 3 Redlock servers answered"):
        lock.acquire()
    assert holders(clients) == 0  # the one live server was released again


def test_a_majority_that_answers_busy_is_still_busy(clients, redlock_servers):
    first = Redlock(clients, "res")
    first.acquire()
    redlock_servers[2].stop()
    assert Redlock(clients, "res", blocking=False).acquire() is None
    first.release()


def test_a_holder_loses_the_lock_when_a_majority_goes_away(clients, redlock_servers):
    lock = Redlock(clients, "res", lease=0.5)
    lock.acquire()
    redlock_servers[0].stop()
    redlock_servers[1].stop()
    assert lock.lost.wait(3)


def test_waiters_take_turns(clients):
    inside, overlaps, done = [0], [0], []

    def work():
        lock = Redlock(clients, "res", blocking_timeout=10)
        for _ in range(5):
            with lock:
                inside[0] += 1
                if inside[0] > 1:
                    overlaps[0] += 1
                time.sleep(0.002)
                inside[0] -= 1
        done.append(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(done) == 4 and overlaps == [0]
