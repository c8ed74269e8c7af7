"""A Redis at its maxmemory under noeviction (as compose runs it) refuses writes: the request
answers 503 unavailable with Retry-After, nothing taken, and nothing in Redis evicted. A
real redis-server of the test's own, filled to its bound."""

from __future__ import annotations

import pytest
import redis

from locking.testing import RedisServer
from orders.models import Order

pytestmark = pytest.mark.django_db


@pytest.fixture
def full_redis():
    """A Redis of this test's own with a sale-like key in it, then bounded below what it holds
    (by 64 kB, past what its buffers vary by), so that every write is refused."""
    server = RedisServer(None, "--maxmemory-policy", "noeviction").start()
    client = redis.Redis.from_url(server.url)
    client.set("sale-state", "kept")
    client.config_set("maxmemory", client.info("memory")["used_memory"] - 65536)
    yield client
    client.close()
    server.close()


def test_a_keyed_request_to_a_full_redis_is_a_503_and_nothing_is_evicted(
    full_redis, settings, make_voucher, api_client
):
    settings.LOCK_REDIS_URL = f"redis://127.0.0.1:{full_redis.connection_pool.connection_kwargs['port']}/0"
    voucher = make_voucher(strategy="db_atomic")
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        full_redis.set("another", "x" * 1000)

    answer = api_client().post(f"/api/vouchers/{voucher.pk}/purchase", headers={"Idempotency-Key": "k1"})

    assert answer.status_code == 503, answer.content
    assert answer.json()["code"] == "unavailable"
    assert int(answer["Retry-After"]) > 0
    assert not Order.objects.exists()
    assert full_redis.get("sale-state") == b"kept"
