"""A bucketed item's states spread evenly over a Redis Cluster's masters for any count of
buckets: on the test cluster (3 masters, a contiguous third of the slots each, as
``redis-cli --cluster create`` makes them), as the cluster itself hashes the keys."""

from __future__ import annotations

import pytest

from inventory.redis_lua.slots import SLOT_WINDOW, SLOTS, bucket_offset, bucket_tag, tag_slot
from inventory.redis_lua.values import GroupKeys, group_tag, state_id
from locking.testing import cluster_nodes

GROUPS = (1, 2, 7, 42, 1000, 123_457, 9_000_001, 9_000_002, 20_000_003, (1 << 25) - 1)
MOST_BUCKETS = 64


def _near_a_boundary(slot: int, boundaries: list[int]) -> bool:
    """Whether ``slot`` lies within reach of a master's first slot: a state is aimed at a
    point of exact thirds and lands up to ``SLOT_WINDOW`` past it, and the masters' ranges
    are thirds give or take a slot, so only such a state may fall on the neighbouring
    master."""
    return any(min((slot - first) % SLOTS, (first - slot) % SLOTS) <= SLOT_WINDOW + 2 for first in boundaries)


def test_states_fall_on_three_masters_at_most_one_apart_for_any_count_of_buckets(cluster_servers, redis_cluster):
    import redis

    with redis.Redis(port=cluster_servers[0].port) as node:
        masters = [one for one in cluster_nodes(node) if one["slots"]]
    assert len(masters) == 3
    for one in masters:  # the layout this spread is made for: each master a contiguous third
        first, last = min(one["slots"]), max(one["slots"])
        assert len(one["slots"]) == last - first + 1
        assert abs(len(one["slots"]) - SLOTS / 3) < 1
    owner = {slot: n for n, one in enumerate(masters) for slot in one["slots"]}
    boundaries = [min(one["slots"]) for one in masters]
    for group in GROUPS:
        counts, near = [0, 0, 0], 0
        for bucket in range(MOST_BUCKETS):
            slot = redis_cluster.cluster_keyslot(GroupKeys.of(state_id(group, bucket)).state)
            counts[owner[slot]] += 1
            near += _near_a_boundary(slot, boundaries)
            # Each state near a boundary may move one state to a neighbour: 2 more apart.
            assert max(counts) - min(counts) <= 1 + 2 * near, (group, bucket + 1, counts, near)


@pytest.mark.parametrize("group", GROUPS)
def test_each_state_lies_within_the_window_past_its_target(group):
    home = tag_slot(bucket_tag(group, 0))
    for bucket in range(1, MOST_BUCKETS):
        tag = bucket_tag(group, bucket)
        assert tag.startswith(f"group:{group}:{bucket}:")
        assert group_tag(state_id(group, bucket)) == "{" + tag + "}"
        assert (tag_slot(tag) - home - bucket_offset(bucket)) % SLOTS < SLOT_WINDOW


def test_whole_triples_of_buckets_aim_a_third_apart_and_the_triples_fill_the_first_third_evenly():
    offsets = [bucket_offset(bucket) for bucket in range(MOST_BUCKETS)]
    for first in range(0, MOST_BUCKETS - 2, 3):
        assert [offsets[first + 1] - offsets[first], offsets[first + 2] - offsets[first]] in (
            [5461, 10922],
            [5461, 10923],
            [5462, 10923],
        )
    # 2**k triples split the first third into 2**k equal steps.
    for triples in (1, 2, 4, 8, 16):
        starts = sorted(offsets[: 3 * triples : 3])
        steps = {later - earlier for earlier, later in zip(starts, starts[1:], strict=False)}
        assert max(steps, default=0) - min(steps, default=0) <= 1
        assert starts[0] == 0 and SLOTS // 3 - starts[-1] <= SLOTS // 3 // triples + 1
