"""Comparing a stock group's ``redis_lua`` state in Redis with the database (docs/design.md,
"Invariants", 5): what drifted, reported; repair comes with the strategy's switch-over.

While a sale runs, Redis is ahead of the database by exactly the reservations waiting in
the stream: for every row, Redis stock + units pending == the database's stock, and for
every user, Redis takes == the user's records + takes pending. The two sides are read
under the group's lock (no batch commits meanwhile) and Redis in one MULTI (no
reservation lands between its reads), so a difference is drift, not a race.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from .persist import with_group_lock
from .reservations import GroupKeys, Pending, Reservations, stock_of, takers_of


@dataclass(frozen=True)
class GroupCheck:
    """One group's comparison.

    Attributes:
        state: False when Redis holds no state for the group (purchases answer 503
            until it is rebuilt).
        stock: {stock id: (units in Redis, units expected)} of the rows that differ.
        takers: {user id: (takes in Redis, takes expected)} of the users that differ.
        pending: reservations waiting in the stream.
        oldest_pending_seconds: how long the oldest of them has waited (0 with none).
    """

    group_id: int
    state: bool
    stock: dict[int, tuple[int, int]] = field(default_factory=dict)
    takers: dict[int, tuple[int, int]] = field(default_factory=dict)
    pending: int = 0
    oldest_pending_seconds: float = 0.0

    @property
    def drifted(self) -> bool:
        return bool(self.stock or self.takers)

    def as_dict(self) -> dict:
        return {**asdict(self), "drifted": self.drifted}


def group_check(
    *,
    group_id: int,
    reservations: Reservations,
    database_stock,
    database_takers,
    wait_seconds: float = 30,
) -> GroupCheck:
    """Compare the group's Redis state with the database.

    Arguments:
        database_stock: a callable returning ``{stock id: units}`` from the database.
        database_takers: a callable returning ``{user id: records}`` from the database.
    """

    def read() -> tuple:
        keys = GroupKeys.of(group_id)
        pipe = reservations.client.pipeline(transaction=True)  # one MULTI: no reservation in between
        pipe.hgetall(keys.state)
        pipe.hgetall(keys.takers)
        pipe.xrange(keys.pending)
        return (*pipe.execute(), database_stock(), database_takers())

    state, redis_takers, entries, stock, takers = with_group_lock(group_id, read, wait_seconds=wait_seconds)
    pending = [Pending.from_entry(group_id, entry_id, fields) for entry_id, fields in entries]
    redis_stock, redis_takers = stock_of(state), takers_of(redis_takers)
    if redis_stock is None:
        return GroupCheck(group_id=group_id, state=False, pending=len(pending))
    units_pending = Counter(one.stock_id for one in pending if one.stock_id is not None)
    takes_pending = Counter(one.user_id for one in pending)
    stock_drift = {
        stock_id: (redis_stock.get(stock_id, 0), units - units_pending[stock_id])
        for stock_id, units in stock.items()
        if redis_stock.get(stock_id, 0) != units - units_pending[stock_id]
    }
    users = set(redis_takers) | set(takers) | set(takes_pending)
    takers_drift = {
        user: (redis_takers.get(user, 0), takers.get(user, 0) + takes_pending[user])
        for user in sorted(users)
        if redis_takers.get(user, 0) != takers.get(user, 0) + takes_pending[user]
    }
    oldest = min((one.at_ms for one in pending), default=None)
    return GroupCheck(
        group_id=group_id,
        state=True,
        stock=stock_drift,
        takers=takers_drift,
        pending=len(pending),
        oldest_pending_seconds=0.0 if oldest is None else max(0.0, time.time() - oldest / 1000),
    )
