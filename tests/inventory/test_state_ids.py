"""The ids and hash tags of a bucketed item's states: bucket 0 is the group's own state, each
other bucket a state of its own in its own slot, and a reservation id names the state whose
stream holds it."""

from __future__ import annotations

import pytest
from redis.cluster import key_slot

from inventory.redis_lua.values import (
    GroupKeys,
    bucketed_states_allowed,
    group_tag,
    reservation_group,
    reservation_id,
    state_id,
    state_of,
)


def test_bucket_zero_is_the_group_and_keeps_its_keys():
    assert state_id(7) == state_id(7, 0) == 7
    assert state_of(7) == (7, 0)
    assert group_tag(7) == "{group:7}"


@pytest.mark.parametrize("group, bucket", [(1, 1), (5, 63), ((1 << 25) - 1, 17)])
def test_a_bucket_state_id_names_its_group_and_bucket_and_its_reservations_name_it(group, bucket):
    state = state_id(group, bucket)
    assert state >= 1 << 31
    assert state_of(state) == (group, bucket)
    assert group_tag(state).startswith(f"{{group:{group}:{bucket}:")
    made = reservation_id(state, 12)
    assert reservation_group(made) == state
    assert made - reservation_id(state, 1) + 1 == 12


def test_the_states_of_one_item_hash_to_different_slots():
    slots = {key_slot(GroupKeys.of(state_id(42, bucket)).state.encode()) for bucket in range(8)}
    assert len(slots) == 8


def test_ids_out_of_range_are_refused():
    with pytest.raises(ValueError):
        state_id(1 << 25, 1)
    with pytest.raises(ValueError):
        state_id(3, 64)
    with pytest.raises(ValueError):
        state_id(1 << 31)
    assert bucketed_states_allowed(1 << 25, 1)
    assert not bucketed_states_allowed(1 << 25, 2)
    assert bucketed_states_allowed((1 << 25) - 1, 64)
