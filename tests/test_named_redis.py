"""The Redis clients that a setting names by its factory's path (core.named_redis): asked
for once per process and setting, and asked for again when a setting changes or in a
forked child, whose factories make clients of their own."""

from __future__ import annotations

import os

import redis

from core.named_redis import named_client

SETTING = "RATE_LIMITS_REDIS_CLIENT"


def ANOTHER():  # noqa: N802 (a setting names it by its path)
    return ANOTHER.client


ANOTHER.client = redis.Redis()


def test_the_factory_is_asked_once_and_again_after_a_setting_changed(settings):
    first = named_client(SETTING)
    assert named_client(SETTING) is first
    settings.RATE_LIMITS_REDIS_CLIENT = "tests.test_named_redis.ANOTHER"
    assert named_client(SETTING) is ANOTHER.client
    settings.RATE_LIMITS_REDIS_CLIENT = "locking.integration.locks_redis"
    assert named_client(SETTING) is first


def test_a_forked_child_asks_its_own_factory():
    parent = named_client(SETTING)
    child = os.fork()
    if child == 0:  # the child answers by its exit status alone
        try:
            os._exit(0 if named_client(SETTING) is not parent and named_client(SETTING).ping() else 1)
        finally:
            os._exit(2)
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
