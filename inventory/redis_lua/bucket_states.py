"""A bucketed ``redis_lua`` item's states: one per bucket, each in its own slot
(``values.state_id``), the per-user rule kept in the user's home state
(``inventory.buckets.home_bucket``), units borrowed from the others when home is empty
(``inventory.redis_lua.transfers``).

Why the rule lives at home: RESERVE checks a user's takes and takes the unit in one script,
and a script runs in one slot. Were a user's takes marked anywhere but where they reserve,
two of their requests could pass the check in two states at once. So every take of a user
runs in one state, their home, where their marks are; when home has no units it borrows
some (a move that keeps each unit's row id) and reserves there again. The rule is then as
atomic as for an unbucketed item, and a take costs one RESERVE, as before, whenever home
has units, which the rebalancer sees to while the sale runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from ..buckets import home_bucket
from .client import Reservations
from .transfers import Borrowed, Transfers
from .values import GroupKeys, Reserved, Rules, rules_states, state_id, state_of

V = TypeVar("V")

# One more than the highest bucket a state can have (``values.state_id``).
BUCKETS_MOST = 64

# How many times a take borrows and reserves again before it answers sold out: each borrow
# brings up to ``transfers.BORROW_UNITS`` units home, which other buyers of that home may
# take first in a crowd.
RESERVE_TRIES = 32


def by_home_state(values: Mapping[int, V], buckets: int) -> list[dict[int, V]]:
    """``values`` ({user id: value}) split by each user's home state (``home_bucket``), in
    state order: where RESERVE reads a user's own figures."""
    at_home: list[dict[int, V]] = [{} for _ in range(buckets)]
    for user_id, value in values.items():
        at_home[home_bucket(user_id, buckets)][user_id] = value
    return at_home


def item_states(group_id: int, buckets: int) -> list[int]:
    """The state ids of a group split into ``buckets``, bucket by bucket; ``ValueError`` for a
    group whose id is too large for states of its own (``values.state_id``)."""
    return [state_id(group_id, bucket) for bucket in range(buckets)]


def states_load(
    reservations: Reservations,
    states: Sequence[int],
    *,
    rules: Rules,
    stock: Sequence[Mapping[int, int]],
    takers: Sequence[Mapping[int, int]] | None = None,
    seqs: Sequence[Mapping[int, list[int]]] | None = None,
    last_reservations: Sequence[int] | None = None,
    lost_floor: Callable[[int, int], int] | None = None,
    abandoned: Sequence[Mapping[int, str]] | None = None,
) -> str:
    """Load every state of an item under one fresh epoch: bucket b's rows (``stock[b]``), the
    takes and abandoned holds of the users whose home it is (``takers[b]``, ``abandoned[b]``)
    and its counter's floor (the
    database's highest reservation id in the state's range; where Redis lost the counter,
    ``lost_floor``'s, as ``Reservations.load`` says: each state counts on its own). The
    caller holds the group's lock exclusive and has dropped the states (a rebuild is of all
    of them, or none): the epoch tells every transfer made before it from those after
    (``transfer_scripts``)."""
    epoch = uuid.uuid4().hex
    rules = replace(rules, states=len(states))
    for bucket, state in reversed(list(enumerate(states))):  # bucket 0, which says the layout, last
        reservations.load(
            group_id=state,
            rules=rules,
            stock=stock[bucket],
            takers=None if takers is None else takers[bucket],
            seqs=None if seqs is None else seqs[bucket],
            last_reservation=0 if last_reservations is None else last_reservations[bucket],
            epoch=epoch,
            lost_floor=lost_floor,
            abandoned=None if abandoned is None else abandoned[bucket],
        )
    return epoch


def reserve_at_home(
    reservations: Reservations, transfers: Transfers, states: Sequence[int], *, user_id: int, rand: float, **options
) -> Reserved:
    """RESERVE in the user's home state, borrowing from the others on ``sold_out`` and
    reserving again; sold out only once no state has units (``Transfers.borrow``), and
    ``busy`` (not sold out) when others took every unit brought home first, through every
    try. ``options`` are ``Reservations.reserve``'s."""
    home = home_bucket(user_id, len(states))
    for _ in range(RESERVE_TRIES):
        answer = reservations.reserve(group_id=states[home], user_id=user_id, rand=rand, states=len(states), **options)
        if answer.refusal != "sold_out":
            return answer
        borrowed = transfers.borrow(states=states, home=home)
        if borrowed is Borrowed.MISSING:  # never sold out on a guess
            return Reserved(refusal="unavailable")
        if borrowed is Borrowed.SOLD_OUT:
            return answer
        if borrowed is Borrowed.BUSY:
            return Reserved(refusal="busy")
        options["rate"] = None  # the request's limits were counted by its first RESERVE
    return Reserved(refusal="busy")


def states_layout(reservations: Reservations, group_id: int) -> int:
    """How many states the group's loaded state says the item has: its rules say, written by
    the same LOAD as the state, and bucket 0's loaded last (``states_load``), so a layout
    read says states that are all there. 1 for an unbucketed item, or none loaded."""
    rules, older = reservations.client.hmget(GroupKeys.of(group_id).state, ["rules", "states"])
    return rules_states(rules, older=older)


def busiest_state(reservations: Reservations, state: int) -> int:
    """Of the states of ``state``'s item, the one whose stream holds the most reservations
    (``state`` itself on a tie, and for an unbucketed item): where one more drain helps most.

    Each state's stream asks for a drain of its own (its kick flag), and a drain that asks for
    a helper (``drain.drain_task_run``) does so on its first full batch, while its item's
    group has room for one more: sent to its own stream, the helper would share that
    bucket's row with it (their batches take turns) while another stream, with no drain yet
    or one waiting for room, fills up. One round trip, the item's states at most 64."""
    group_id = state_of(state)[0]
    states = item_states(group_id, states_layout(reservations, group_id))
    if len(states) == 1:
        return state
    pipe = reservations.client.pipeline(transaction=False)
    for one in states:
        pipe.xlen(GroupKeys.of(one).pending)
    waiting = dict(zip(states, pipe.execute(), strict=True))
    return max(states, key=lambda one: (waiting[one], one == state))


def states_present(reservations: Reservations, group_id: int, *, every_key: bool = False) -> list[int]:
    """The ids of the group's bucket states (bucket 1 and on) that Redis holds a state, a
    stream or a transfer of: what a retire or a rebuild must persist and drop, whatever the
    bucket count was; with ``every_key``, any key at all (a counter, failed reservations:
    what a close removes)."""
    pipe = reservations.client.pipeline(transaction=False)
    states = [state_id(group_id, bucket) for bucket in range(1, BUCKETS_MOST)]
    for state in states:
        keys = GroupKeys.of(state)
        pipe.exists(*(keys.all() if every_key else (keys.state, keys.pending, keys.outbox, keys.applied)))
    return [state for state, found in zip(states, pipe.execute(), strict=True) if found]
