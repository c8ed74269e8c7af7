"""A bucketed item's ``redis_lua`` states through its life (``inventory.redis_lua.item_states``
does it for an item's one state, and calls these for an item of more than one bucket): all
its states loaded, rebuilt, retired and changed together, under the group's lock held
exclusive, and released units returned to the state of their row's bucket.

A state missing among several means rebuild all: every state's stream persisted, every
state dropped, every state loaded from the database under one new epoch (so that no transfer
made before it can land after it, ``inventory.redis_lua.transfer_scripts``). Bucket b's state
holds the rows of bucket b (a row of a bucket beyond the count, left by a split into fewer,
goes to ``bucket % count``), the marks of the users whose home it is, and a counter above
the database's highest reservation id in its own range.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..buckets import home_bucket
from ..models import Abandoned, Stock
from .bucket_states import by_home_state, item_states, states_load, states_present
from .client import Reservations
from .consumers import consumer_leave
from .drain import persist_all
from .numbering import lost_floor_record, state_last_reservation
from .persist import Persisted
from .values import GroupKeys, abandoned_value, bucketed_states_allowed

if TYPE_CHECKING:
    from ..product import Product


def item_bucketed(product: Product, item: Any) -> int:
    """The item's number of states: its buckets where it has more than one, its takes route
    home (``Product.routes_home``) and its group's id allows states of their own, else 1 (one
    state, as an unbucketed item)."""
    buckets = getattr(item, "buckets", 1) or 1
    group_id = product.group_of(item)
    spread = buckets > 1 and product.routes_home and bucketed_states_allowed(group_id, buckets)
    return buckets if spread else 1


def _states_of(group_id: int, reservations: Reservations) -> list[int]:
    """Every state of the group Redis holds anything of, bucket 0 first."""
    return [group_id, *states_present(reservations, group_id)]


def states_persist(group_id: int, reservations: Reservations, step: Callable[[int, int], Persisted]) -> None:
    """Persist every stream of the group's states (``step(state, batch)``, reading as this
    process' consumer), each consumer leaving once its stream is persisted."""
    for state in _states_of(group_id, reservations):
        persist_all(lambda batch, state=state: step(state, batch))
        consumer_leave(reservations.client, state)


def states_drop(group_id: int, reservations: Reservations) -> None:
    """Drop every state of the group (each keeps its stream and counter), with the transfers'
    outboxes and marks: the next load counts their units from the database."""
    for state in _states_of(group_id, reservations):
        reservations.drop(group_id=state)
        keys = GroupKeys.of(state)
        reservations.client.delete(keys.outbox, keys.applied)


def states_forget(group_id: int, reservations: Reservations) -> None:
    """Remove every key of every state of the group, bucket 0's last: a key of bucket 0 left
    means a forget still to finish."""
    for state in states_present(reservations, group_id, every_key=True):
        reservations.forget(group_id=state)
    reservations.forget(group_id=group_id)


def states_loaded(group_id: int, buckets: int, reservations: Reservations) -> bool:
    """Whether every one of the item's states is loaded."""
    pipe = reservations.client.pipeline(transaction=False)
    for state in item_states(group_id, buckets):
        pipe.hexists(GroupKeys.of(state).state, "live")
    return all(pipe.execute())


def states_load_item(product: Product, item: Any, buckets: int, reservations: Reservations) -> bool:
    """Load all the item's states from the database (the caller holds the group's lock and has
    persisted every stream): none when every one is loaded already, else all of them again."""
    group_id = product.group_of(item)
    if states_loaded(group_id, buckets, reservations):
        return False
    states_drop(group_id, reservations)
    states = item_states(group_id, buckets)
    records = product.taking(product.records(item.pk))
    takers, numbers = product.takes(records)
    stock: list[dict[int, int]] = [{} for _ in states]
    for row, quantity, bucket in Stock.objects.filter(group_id=group_id).values_list("id", "quantity", "bucket"):
        stock[bucket % buckets][row] = quantity
    seqs: defaultdict[int, list[int]] = defaultdict(list)
    for user_id, seq in numbers:
        seqs[user_id].append(seq)
    last = [state_last_reservation(product, state) for state in states]
    states_load(
        reservations,
        states,
        rules=product.rules(item),
        stock=stock,
        takers=by_home_state(takers, buckets),
        seqs=by_home_state(seqs, buckets),
        last_reservations=last,
        lost_floor=lost_floor_record,
        abandoned=by_home_state(abandoned_values(group_id), buckets),
    )
    return True


def states_change(group_id: int, buckets: int, reservations: Reservations, rules, units: Mapping[int, int]) -> None:
    """New rules to every state, and units added to the state of each row's bucket."""
    states = item_states(group_id, buckets)
    for state in states:
        reservations.set_rules(group_id=state, rules=replace(rules, states=len(states)))
    rows = dict(Stock.objects.filter(pk__in=list(units)).values_list("id", "bucket"))
    for stock_id, added in units.items():
        reservations.add_units(group_id=states[rows.get(stock_id, 0) % buckets], stock_id=stock_id, units=added)


def states_units_return(
    group_id: int,
    buckets: int,
    reservations: Reservations,
    units: Mapping[int, int],
    takes_freed: Iterable[int],
    abandoned: Mapping[int, str],
) -> None:
    """Released units back to the state of their row's bucket, the takes freed and the
    abandoned holds in each user's home state, where RESERVE checks them."""
    states = item_states(group_id, buckets)
    rows = dict(Stock.objects.filter(pk__in=list(units)).values_list("id", "bucket"))
    units_at: list[Counter] = [Counter() for _ in states]
    for stock_id, count in units.items():
        units_at[rows.get(stock_id, 0) % buckets][stock_id] += count
    freed_at: list[list[int]] = [[] for _ in states]
    for user_id in takes_freed:
        freed_at[home_bucket(user_id, buckets)].append(user_id)
    abandoned_at = by_home_state(abandoned, buckets)
    for state, at_units, freed, gave in zip(states, units_at, freed_at, abandoned_at, strict=True):
        if at_units or freed or gave:
            reservations.units_return(group_id=state, units=at_units, takes_freed=freed, abandoned=gave)


def abandoned_values(group_id: int, user_ids: list[int] | None = None) -> dict[int, str]:
    """The users' counts of the group's item as the database holds them (of every user who
    abandoned any, given no ``user_ids``), as the ``redis_lua`` state keeps them
    (``abandoned_value``): what a load and a release write to Redis."""
    rows = Abandoned.objects.filter(group_id=group_id)
    if user_ids is not None:
        rows = rows.filter(user_id__in=user_ids)
    found = rows.values_list("user_id", "holds", "last_at")
    return {user_id: abandoned_value(holds, last_at) for user_id, holds, last_at in found}
