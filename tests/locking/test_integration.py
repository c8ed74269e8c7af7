"""The Django side: the lock connection check and the lock client."""

from __future__ import annotations

from locking.integration import lock_client, lock_connection_check


def test_the_check_passes_against_a_real_redis(settings):
    settings.LOCK_REDIS_URLS = []
    assert lock_connection_check(None) == []


def test_the_check_names_a_lock_server_that_does_not_answer(settings):
    settings.LOCK_REDIS_URL = "redis://127.0.0.1:1/0"
    settings.LOCK_REDIS_URLS = []
    [error] = lock_connection_check(None)
    assert error.id == "locking.E002"


def test_the_check_refuses_a_url_that_is_not_redis(settings):
    settings.LOCK_REDIS_URLS = ["http://127.0.0.1:6379"]
    assert [e.id for e in lock_connection_check(None)] == ["locking.E001"]


def test_the_lock_client_is_one_per_url_and_process(settings):
    assert lock_client() is lock_client()
    assert lock_client("redis://127.0.0.1:6379/13") is not lock_client()
