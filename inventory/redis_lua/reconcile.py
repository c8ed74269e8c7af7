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
one that was read. A take number missing is marked (one missing would give two takes the
same number), and one marked that no take uses is dropped, so that the marks count the
takes again.

Totals first. Comparing each user's takes reads every record of the item and every user's
count in Redis, which grows with the item's history; the beat (``totals_first``) compares
totals first and each user only when they differ:

- each stock row, as above (a handful of rows);
- the takes of every user together, which the state keeps beside its rows (``live``),
  against the records that count against the limit (one ``COUNT`` through the item's index)
  + the reservations pending. Every script keeps that total equal to the users' takes in
  Redis: a take adds one, an undone or returned take removes its own, a load counts one per
  record, a repair adds what it changed. So a record written, lost or released on one side
  only changes one total and not the other.

What the totals cannot see is a change that keeps them: a user's field in Redis changed or
lost alone (no script does that; a hand or a bug), or in the database one user's record gone
and another's added between two runs. So the comparison per user still runs, whatever the
totals say, once ``RESERVATIONS_RECONCILE_FULL_SECONDS`` have passed since the last one that
found the group whole (a key in Redis with that expiry, ``GroupKeys.checked``), and always
under ``manage.py reconcile`` and ``audit``: such a drift is found within that period. A
pool whose database holds two draws of one user under one number (written by an unguarded
strategy before ``redis_lua``) keeps both takes and the one number in that user's field
(``2:1``, ``inventory.redis_lua.scripts``), and agrees with it.

A bucketed item's states are compared by ``inventory.redis_lua.reconcile_buckets``, totals
first by the same rule (``totals_stand_in``) and marked whole by the same key
(``whole_marked``).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace

from django.conf import settings

from ..metrics import drift_counted
from .client import Reservations
from .drain import with_group_lock
from .values import GroupKeys, Pending, live_of, users_of

# Each user's takes, and the (user id, take number) of every take: the database's side.
Takes = tuple[dict[int, int], Iterable[tuple[int, int]]]

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
        seqs_unused: take numbers marked that no take uses (no drift: a repair drops them).
        pending: reservations waiting in the stream.
        oldest_pending_seconds: how long the oldest of them has waited (0 with none).
        repaired: whether the differences were repaired (``repair=True`` and drift).
        rebuilt: whether a missing state was rebuilt from the database.
        per_user: whether each user's takes were compared (False: the totals agreed).
    """

    group_id: int
    state: bool
    stock: dict[int, tuple[int, int]] = field(default_factory=dict)
    takers: dict[int, tuple[int, int]] = field(default_factory=dict)
    seqs_missing: int = 0
    seqs_unused: int = 0
    pending: int = 0
    oldest_pending_seconds: float = 0.0
    repaired: bool = False
    rebuilt: bool = False
    per_user: bool = True

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
    database_takes: Callable[[], Takes],
    database_takes_total: Callable[[], int],
    repair: bool = False,
    totals_first: bool = False,
    wait_seconds: float = 30,
    database_abandoned: Callable[[], dict[int, str]] | None = None,
    written_acknowledged: Callable[[], None] | None = None,
) -> GroupCheck:
    """Compare the group's Redis state with the database and, with ``repair``, set it right.
    With ``totals_first``, each user's takes are compared only when the totals differ or the
    last comparison per user is older than ``RESERVATIONS_RECONCILE_FULL_SECONDS``.

    Arguments:
        database_stock: returns ``{stock id: units}`` from the database.
        database_takes: returns ``{user id: records}`` and the ``(user id, take number)`` of
            every record.
        database_takes_total: returns the number of records.
        database_abandoned: returns each user's abandoned holds (``abandoned_value``): with
            ``repair``, the comparison per user sets Redis' counts to them where they differ
            (a release whose return missed Redis), as a load writes them.
        written_acknowledged: called first, under the lock: acknowledges the entries whose
            records the database holds (a drain that stopped between its commit and its
            acknowledgement), which the comparison would count twice.
    """
    keys = GroupKeys.of(group_id)

    def totals_agree() -> GroupCheck | None:
        pipe = reservations.multi(group_id=group_id)
        pipe.hget(keys.state, "live")
        pipe.xrange(keys.pending)
        pipe.exists(keys.checked)
        live, entries, checked = pipe.execute()
        pending = [Pending.from_entry(group_id, entry_id, fields) for entry_id, fields in entries]
        found = live_of(live)
        if found is None:
            return GroupCheck(group_id=group_id, state=False, pending=len(pending))
        takes, redis_stock = found
        return totals_stand_in(
            group_id,
            checked=bool(checked),
            rows_differ=lambda: bool(_stock_drift(redis_stock, database_stock(), pending)),
            takes=takes,
            database_takes_total=database_takes_total,
            pending=pending,
        )

    def per_user() -> GroupCheck:
        pipe = reservations.multi(group_id=group_id)  # no reservation in between
        pipe.hgetall(keys.state)
        pipe.xrange(keys.pending)
        state, entries = pipe.execute()
        pending = [Pending.from_entry(group_id, entry_id, fields) for entry_id, fields in entries]
        found = live_of(next((value for name, value in state.items() if name in (b"live", "live")), None))
        if found is None:
            return GroupCheck(group_id=group_id, state=False, pending=len(pending))
        users = users_of(state)
        takers, seqs = database_takes()
        check, missing, unused = _compare(
            group_id,
            pending,
            redis_stock=found[1],
            redis_takers={user: takes for user, (takes, _) in users.items() if takes > 0},
            redis_seqs={(user, n) for user, (_, numbers) in users.items() for n in numbers},
            stock=database_stock(),
            takers=takers,
            seqs=set(seqs),
        )
        if repair and (check.drifted or unused):
            repaired = reservations.repair(
                group_id=group_id,
                stock={stock_id: want - have for stock_id, (have, want) in check.stock.items()},
                takers={user: want - have for user, (have, want) in check.takers.items()},
                seqs=missing,
                unused=unused,
            )
            check = replace(check, repaired=repaired and check.drifted)
        if repair and database_abandoned is not None:
            _abandoned_repair(reservations, keys.abandoned, database_abandoned())
        if not check.drifted or check.repaired:
            whole_marked(reservations, group_id)
        return check

    def run() -> GroupCheck:
        if written_acknowledged is not None:
            written_acknowledged()
        return (totals_first and totals_agree()) or per_user()

    return with_group_lock(group_id, run, wait_seconds=wait_seconds)


def _abandoned_repair(reservations: Reservations, key: str, database: dict[int, str]) -> None:
    """Set the group's abandoned holds in Redis to the database's where they differ: a count
    only grows, and the database's is the one every release wrote."""
    found = {int(user): value.decode() if isinstance(value, bytes) else value for user, value in
             reservations.client.hgetall(key).items()}  # fmt: skip
    differ = {user: value for user, value in database.items() if found.get(user) != value}
    if differ:
        reservations.client.hset(key, mapping=differ)


def totals_stand_in(
    group_id: int,
    *,
    checked: bool,
    rows_differ: Callable[[], bool],
    takes: int,
    database_takes_total: Callable[[], int],
    pending: list[Pending],
) -> GroupCheck | None:
    """The check when the totals may stand in for the comparison per user, else None: the
    last comparison per user found the group whole and has not expired (``checked``), no
    stock row differs, and the takes of every user together in Redis (``takes``) are the
    records that count against the limit + the reservations ``pending`` (each one take)."""
    if not checked or rows_differ() or takes != database_takes_total() + len(pending):
        return None
    return GroupCheck(
        group_id=group_id,
        state=True,
        pending=len(pending),
        oldest_pending_seconds=_oldest_seconds(pending),
        per_user=False,
    )


def whole_marked(reservations: Reservations, group_id: int) -> None:
    """A comparison per user found the group whole (or made it so): the totals may stand in
    for the next ones until the key expires (``RESERVATIONS_RECONCILE_FULL_SECONDS``)."""
    reservations.client.set(GroupKeys.of(group_id).checked, 1, ex=settings.RESERVATIONS_RECONCILE_FULL_SECONDS)


def _stock_drift(redis_stock: dict[int, int], stock: dict[int, int], pending: list[Pending]) -> dict:
    """{stock id: (units in Redis, units expected)} of the rows that differ."""
    units_pending = Counter(one.stock_id for one in pending if one.stock_id is not None)
    return {
        stock_id: (redis_stock.get(stock_id, 0), units - units_pending[stock_id])
        for stock_id, units in stock.items()
        if redis_stock.get(stock_id, 0) != units - units_pending[stock_id]
    }


def _oldest_seconds(pending: list[Pending]) -> float:
    oldest = min((one.at_ms for one in pending), default=None)
    return 0.0 if oldest is None else max(0.0, time.time() - oldest / 1000)


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
) -> tuple[GroupCheck, list[tuple[int, int]], list[tuple[int, int]]]:
    """The comparison, the take numbers in use that Redis did not mark, and those it marked
    that no take uses."""
    takes_pending = Counter(one.user_id for one in pending)
    users = set(redis_takers) | set(takers) | set(takes_pending)
    takers_drift = {
        user: (redis_takers.get(user, 0), takers.get(user, 0) + takes_pending[user])
        for user in users
        if redis_takers.get(user, 0) != takers.get(user, 0) + takes_pending[user]
    }
    in_use = seqs | {(one.user_id, one.seq) for one in pending}
    missing = sorted(in_use - redis_seqs)
    unused = sorted(redis_seqs - in_use)
    check = GroupCheck(
        group_id=group_id,
        state=True,
        stock=_stock_drift(redis_stock, stock, pending),
        takers=dict(sorted(takers_drift.items())),
        seqs_missing=len(missing),
        seqs_unused=len(unused),
        pending=len(pending),
        oldest_pending_seconds=_oldest_seconds(pending),
    )
    return check, missing, unused


def group_reconcile(*, check: Callable[[], GroupCheck], rebuild: Callable[[], bool], live: bool) -> GroupCheck:
    """``check()`` with its repair, then, when the group has no state and is ``live`` (its
    item is ``redis_lua``), ``rebuild()`` it from the database."""
    checked = check()
    if checked.state or not live:
        return checked
    rebuilt = rebuild()
    return GroupCheck(group_id=checked.group_id, state=rebuilt, pending=checked.pending, rebuilt=rebuilt)


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
