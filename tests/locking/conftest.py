import os

import pytest
import redis

# A database of its own, one per pytest-xdist worker (gw0, gw1, ...: 13, 12, ...), since each
# test empties it.
LOCK_TEST_DB = 13 - int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))


@pytest.fixture
def r() -> redis.Redis:
    """A plain redis-py client on a database of its own, emptied before each test."""
    client = redis.Redis(host="127.0.0.1", port=6379, db=LOCK_TEST_DB)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()
