"""The voucher that ``benchmarks.persist_consumers`` drains: its streams filled with waiting
reservations, and the streams each consumer drains."""

from __future__ import annotations


def voucher_filled(reservations_count: int, buyers: list[int], buckets: int):
    """A fresh ``redis_lua`` voucher of ``reservations_count`` units, loaded in Redis as one
    state (``buckets`` 1) or one state per bucket, each state's stream holding an even share of
    ``reservations_count`` reservations of distinct buyers; the voucher and its states.

    Each share is reserved straight in its state, which holds that bucket's units (as many as
    its share), so no take borrows: every batch locks its own bucket's row only."""
    from django.utils import timezone

    from inventory.models import Stock
    from inventory.redis_lua.bucket_states import item_states, states_load
    from inventory.redis_lua.client import reservations_client
    from inventory.redis_lua.values import GroupKeys, Rules
    from orders.services import voucher_create

    now = timezone.now()
    voucher = voucher_create(
        title="persist bench", stock=reservations_count, begin_at=now, end_at=now + timezone.timedelta(hours=1),
        strategy="db_atomic", buckets=buckets,
    )  # fmt: skip
    group = voucher.group_id
    reservations = reservations_client()
    states = item_states(group, buckets)
    for state in states:
        reservations.client.delete(*GroupKeys.of(state).all())
    rows = Stock.objects.filter(group_id=group).order_by("bucket").values_list("id", "quantity")
    stock = [{row: quantity} for row, quantity in rows]
    rules = Rules(voucher.begin_at, voucher.end_at, 1, 0)
    if buckets == 1:
        reservations.load(group_id=group, rules=rules, stock=stock[0])
    else:
        states_load(reservations, states, rules=rules, stock=stock)
    # units_spread gives bucket b as many units as this gives its stream reservations.
    for n, user in enumerate(buyers[:reservations_count]):
        reserved = reservations.reserve(group_id=states[n % buckets], user_id=user, rand=0.5, states=buckets)
        assert reserved.refusal is None
    return voucher, states


def streams_spread(consumers: int, states: list[int]) -> list[tuple[int, ...]]:
    """The streams each of ``consumers`` drains, one after another: consumer k those of states
    k, k + consumers, ... when there are more states than consumers, else the stream of state
    k modulo their number (several consumers share a stream, as a drain and its helpers do)."""
    if consumers >= len(states):
        return [(states[k % len(states)],) for k in range(consumers)]
    return [tuple(states[k::consumers]) for k in range(consumers)]
