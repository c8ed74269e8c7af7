"""The process-wide hooks: what ``locking.observe`` installs hears every lock created
without hooks of its own, and a lock's own hooks still win."""

from __future__ import annotations

import os

import pytest
import redis

from locking import CountingMetrics, Lock, lock_many, observe
from locking.metrics import observer


@pytest.fixture
def client():
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"))
    yield client
    client.close()


@pytest.fixture
def installed():
    before = observer()
    counting = CountingMetrics()
    observe(counting)
    yield counting
    observe(before)


def test_an_installed_observer_hears_locks_created_without_hooks(client, installed):
    holder = Lock(client, "observer-test:a")
    holder.acquire()
    assert Lock(client, "observer-test:a", blocking=False).acquire() is None
    holder.release()
    with lock_many(client, ["observer-test:b", "observer-test:c"]):
        pass
    assert installed.counts == {"uncontended": 2, "refused": 1, "released": 2}


def test_hooks_of_its_own_win_and_none_restores_the_no_ops(client, installed):
    own = CountingMetrics()
    with Lock(client, "observer-test:d", metrics=own):
        pass
    assert own.counts == {"uncontended": 1, "released": 1} and installed.counts == {}
    observe(None)
    assert type(Lock(client, "observer-test:e").metrics).__name__ == "LockMetrics"
