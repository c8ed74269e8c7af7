"""``locking.LockLog``: every lock event as a line of the standard logging module, with its
fields; several hooks installed at once each hear every event; and the lines the watchdog
writes (a lost lease) are written in the context of the code that acquired the lock, so a
logging filter that reads a contextvar (an application's request id) finds its value."""

from __future__ import annotations

import contextvars
import logging
import os
import uuid

import pytest
import redis

from locking import CountingMetrics, Fanout, Lock, LockLog, observe
from locking.lock import resource_keys
from locking.metrics import observer

# What an application keeps per request; the library never sees it.
REQUEST = contextvars.ContextVar("request", default=None)


class Recorded(logging.Handler):
    """The records of one logger, each stamped with REQUEST as a filter would."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        record.request = REQUEST.get()
        self.records.append(record)


@pytest.fixture
def client():
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"))
    yield client
    client.close()


@pytest.fixture
def recorded():
    logger = logging.getLogger(f"locking-test-{uuid.uuid4().hex}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = Recorded()
    logger.addHandler(handler)
    yield logger, handler.records
    logger.removeHandler(handler)


def name() -> str:
    return f"log-test:{uuid.uuid4().hex}"


def test_taken_refused_and_released_are_lines_with_their_fields(client, recorded):
    logger, records = recorded
    lock, other = name(), name()
    holder = Lock(client, lock, metrics=LockLog(logger), renew=False)
    holder.acquire()
    assert Lock(client, lock, blocking=False, metrics=LockLog(logger)).acquire() is None
    holder.release()
    events = [(r.levelname, r.event, r.lock) for r in records]
    assert events == [
        ("INFO", "lock.acquired", lock),
        ("INFO", "lock.refused", lock),
        ("INFO", "lock.released", lock),
    ]
    acquired, refused, released = records
    assert acquired.contended is False and acquired.wait_ms >= 0 and refused.wait_ms >= 0
    assert released.held_ms >= 0 and f"lock {lock} released after" in released.getMessage()
    with Lock(client, other, metrics=LockLog(logger)):
        pass
    assert [r.lock for r in records[3:]] == [other, other]


def test_with_info_off_nothing_is_written(client, recorded):
    logger, records = recorded
    logger.setLevel(logging.WARNING)
    with Lock(client, name(), metrics=LockLog(logger)):
        pass
    assert records == []


def test_a_lease_lost_under_the_watchdog_is_a_warning_in_the_acquirers_context(client, recorded):
    logger, records = recorded
    lock = name()
    token = REQUEST.set("request-that-acquired")
    try:
        holder = Lock(client, lock, lease=0.3, metrics=LockLog(logger))
        holder.acquire()
    finally:
        REQUEST.reset(token)
    client.delete(resource_keys(lock)[0])  # the key gone: the next renewal finds it another's
    assert holder.lost.wait(10), "the watchdog never noticed"
    holder.release()
    (lost,) = [r for r in records if r.event == "lock.lost"]
    assert lost.levelname == "WARNING" and lost.reason and lost.lock == lock
    assert lost.threadName == "lock-watchdog"
    assert lost.request == "request-that-acquired"


def test_several_installed_hooks_each_hear_every_event(client, recorded):
    logger, records = recorded
    before = observer()
    counting = CountingMetrics()
    observe(counting, None, LockLog(logger))
    try:
        assert isinstance(observer(), Fanout)
        with Lock(client, name()):
            pass
    finally:
        observe(before)
    assert counting.counts == {"uncontended": 1, "released": 1}
    assert [r.event for r in records] == ["lock.acquired", "lock.released"]
