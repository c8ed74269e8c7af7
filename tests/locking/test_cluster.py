"""Locks on a real three-node Redis Cluster: keys of one resource share a slot,
and lock_many spans slots (and nodes) all or nothing."""

from __future__ import annotations

from redis.crc import key_slot

from locking import Lock, Released, lock_many
from locking.lock import resource_keys


def test_a_resource_keys_share_one_slot():
    slots = {key_slot(key.encode()) for key in resource_keys("stock:42")}
    assert len(slots) == 1


def test_lock_and_hand_off_on_a_cluster(redis_cluster):
    lock = Lock(redis_cluster, "stock:42")
    assert lock.acquire() is not None
    assert Lock(redis_cluster, "stock:42", blocking=False).acquire() is None
    assert lock.release() is Released.RELEASED


def test_lock_many_spans_nodes_all_or_nothing(redis_cluster):
    names = [f"sku:{n}" for n in range(60)]
    nodes = {redis_cluster.get_node_from_key(resource_keys(name)[0]).port for name in names}
    assert len(nodes) == 3  # the names really live on every node
    held = lock_many(redis_cluster, names, blocking=False)
    fences = held.acquire()
    assert set(fences) == set(names)
    assert held.release() is Released.RELEASED
    blocker = Lock(redis_cluster, names[-1])
    blocker.acquire()
    assert lock_many(redis_cluster, names, blocking=False).acquire() is None
    for name in names[:-1]:  # groups taken before the busy one were rolled back
        assert not redis_cluster.exists(resource_keys(name)[0]), name
    blocker.release()
