import pytest
import redis

LOCK_TEST_DB = 13


@pytest.fixture
def r() -> redis.Redis:
    """A plain redis-py client on a database of its own, emptied before each test."""
    client = redis.Redis(host="127.0.0.1", port=6379, db=LOCK_TEST_DB)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()
