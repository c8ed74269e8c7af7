"""Comparing a stock group's ``redis_lua`` state in Redis with the database (docs/design.md,
"Invariants", 5), and repairing what drifted.

While a sale runs, Redis is ahead of the database by exactly the reservations waiting in
the stream: for every row, Redis stock + units pending == the database's stock; for every
user, Redis takes == the user's records + takes pending; and every take number in use (a
record's, or a pending reservation's) is marked in Redis. The two sides are read under the
group's lock (no batch commits meanwhile) and Redis in one MULTI (no reservation lands
between its reads), so a difference is drift, not a race.

A repair adds the differences as relative amounts, under the same hold of the lock: a
reservation that runs between the read and the repair changes the Redis stock and the
stream alike (one unit out of the stock, one entry in), so the difference it leaves is the
one that was read. Take numbers are only ever added: one marked in use that is not (an
undone take's) costs nothing, one missing would give two takes the same number.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace

from django.db.models import Count

from .groups import with_group_lock
from .metrics import drift_counted
from .reservations import GroupKeys, Pending, Reservations, stock_of, takers_of

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupCheck:
    """One group's comparison.

    Attributes:
        state: False when Redis holds no state for the group (purchases answer 503
            until it is rebuilt).
        stock: {stock id: (units in Redis, units expected)} of the rows that differ.
        takers: {user id: (takes in Redis, takes expected)} of the users that differ.
        seqs_missing: take numbers in use that Redis did not mark.
        pending: reservations waiting in the stream.
        oldest_pending_seconds: how long the oldest of them has waited (0 with none).
        repaired: whether the differences were repaired (``repair=True`` and drift).
        rebuilt: whether a missing state was rebuilt from the database.
    """

    group_id: int
    state: bool
    stock: dict[int, tuple[int, int]] = field(default_factory=dict)
    takers: dict[int, tuple[int, int]] = field(default_factory=dict)
    seqs_missing: int = 0
    pending: int = 0
    oldest_pending_seconds: float = 0.0
    repaired: bool = False
    rebuilt: bool = False

    @property
    def drifted(self) -> bool:
        return bool(self.stock or self.takers or self.seqs_missing)

    def as_dict(self) -> dict:
        return {**asdict(self), "drifted": self.drifted}


def group_check(
    *,
    group_id: int,
    reservations: Reservations,
    database_stock: Callable[[], dict[int, int]],
    database_takers: Callable[[], dict[int, int]],
    database_seqs: Callable[[], Iterable[tuple[int, int]]],
    repair: bool = False,
    wait_seconds: float = 30,
) -> GroupCheck:
    """Compare the group's Redis state with the database and, with ``repair``, set it right.

    Arguments:
        database_stock: returns ``{stock id: units}`` from the database.
        database_takers: returns ``{user id: records}`` from the database.
        database_seqs: returns the ``(user id, take number)`` of every record.
    """

    def run() -> GroupCheck:
        keys = GroupKeys.of(group_id)
        pipe = reservations.client.pipeline(transaction=True)  # one MULTI: no reservation in between
        pipe.hgetall(keys.state)
        pipe.hgetall(keys.takers)
        pipe.xrange(keys.pending)
        pipe.hkeys(keys.seqs)
        state, redis_takers, entries, redis_seqs = pipe.execute()
        pending = [Pending.from_entry(group_id, entry_id, fields) for entry_id, fields in entries]
        redis_stock = stock_of(state)
        if redis_stock is None:
            return GroupCheck(group_id=group_id, state=False, pending=len(pending))
        check, missing = _compare(
            group_id,
            pending,
            redis_stock=redis_stock,
            redis_takers=takers_of(redis_takers),
            redis_seqs={_seq(name) for name in redis_seqs},
            stock=database_stock(),
            takers=database_takers(),
            seqs=set(database_seqs()),
        )
        if repair and check.drifted:
            repaired = reservations.repair(
                group_id=group_id,
                stock={stock_id: want - have for stock_id, (have, want) in check.stock.items()},
                takers={user: want - have for user, (have, want) in check.takers.items()},
                seqs=missing,
            )
            check = replace(check, repaired=repaired)
        return check

    return with_group_lock(group_id, run, wait_seconds=wait_seconds)


def _compare(
    group_id: int,
    pending: list[Pending],
    *,
    redis_stock: dict[int, int],
    redis_takers: dict[int, int],
    redis_seqs: set[tuple[int, int]],
    stock: dict[int, int],
    takers: dict[int, int],
    seqs: set[tuple[int, int]],
) -> tuple[GroupCheck, list[tuple[int, int]]]:
    """The comparison, and the take numbers in use that Redis did not mark."""
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
    missing = sorted((seqs | {(one.user_id, one.seq) for one in pending}) - redis_seqs)
    oldest = min((one.at_ms for one in pending), default=None)
    check = GroupCheck(
        group_id=group_id,
        state=True,
        stock=stock_drift,
        takers=takers_drift,
        seqs_missing=len(missing),
        pending=len(pending),
        oldest_pending_seconds=0.0 if oldest is None else max(0.0, time.time() - oldest / 1000),
    )
    return check, missing


def group_reconcile(*, check: Callable[[], GroupCheck], rebuild: Callable[[], bool], live: bool) -> GroupCheck:
    """``check()`` with its repair, then, when the group has no state and is ``live`` (its
    item is ``redis_lua``), ``rebuild()`` it from the database."""
    checked = check()
    if checked.state or not live:
        return checked
    rebuilt = rebuild()
    return GroupCheck(group_id=checked.group_id, state=rebuilt, pending=checked.pending, rebuilt=rebuilt)


def takes_by_user(records) -> dict[int, int]:
    """User id -> records, of a product's queryset of orders or draws: the database's side
    of each user's takes."""
    return dict(records.values("user_id").annotate(n=Count("id")).values_list("user_id", "n"))


def _seq(name) -> tuple[int, int]:
    user, n = (name.decode() if isinstance(name, bytes) else str(name)).split(":")
    return int(user), int(n)


def report_drift(kind: str, checks: list[tuple[int, GroupCheck]]) -> int:
    """Log every item whose state drifted or was rebuilt, and count them
    (``flashsale_reconcile_drift_total``); how many did."""
    told = 0
    for pk, check in checks:
        if check.drifted or check.rebuilt or not check.state:
            told += 1
            logger.warning("reconcile %s %s: %s", kind, pk, check.as_dict())
    drift_counted(kind, told)
    return told
