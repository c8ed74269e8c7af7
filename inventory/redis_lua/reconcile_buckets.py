"""Comparing a bucketed item's ``redis_lua`` states with the database, and repairing what
drifted (``inventory.redis_lua.reconcile`` does it for an item's one state).

Units move between the states (``inventory.redis_lua.transfers``) but not between the
database's rows: a borrowed unit keeps its row id. So, per row, the units in every state's
``live`` plus those in outbox entries not yet applied in their receiver equal the database's
quantity less the reservations of that row waiting in every state's stream. Per user, the
marks sit in the user's home state, whose stream holds every pending take of theirs (every
take runs RESERVE at home): marks there == records + takes pending there.

Each state is read in one MULTI, but the states one after another, and a move can run
between two reads (takes borrow without the group's lock): a unit read in its giver before
it left and in its receiver after it came is counted twice, one that left a state read
after it and came into one read before it not at all. A difference of rows is therefore
taken for drift only when a second read of every state finds the same one and no move ran
at any state between its two reads (each state counts the steps of moves it runs,
``moves``, in the scripts of the steps): then the first read is what every state held at
its end. Two reads alone are not enough under a crowd that borrows all the time, whose
moves show the same difference in both. The states are read again, up to
``STATES_READS`` times, until two reads in a row saw no move; a run through which moves
never stop takes no row for drift, and the next run looks again. A repair adds relative amounts, each row's to the state
of the row's own bucket and each user's to their home state, so a move or a take running
meanwhile leaves it true.

Totals first, as for one state (``inventory.redis_lua.reconcile``, whose rule this shares:
``totals_stand_in``). The beat reads of each state only ``live`` (its rows, and the takes of
its users together), its stream and its outbox and applied marks (as many as moves in
flight), never the users' fields: the rows as above, and the takes of every state together
against the item's records that count against the limit + the reservations waiting in every
stream. A move carries units, never takes, so it cannot make the takes differ between two
reads. Each user is compared (every field of every state, every record) only when these
differ, or once ``RESERVATIONS_RECONCILE_FULL_SECONDS`` have passed since the last such
comparison found the item whole. That is marked in bucket 0's ``checked`` key: bucket 0 is
the one state every bucket count has (its id is the group's own), and its key is the one
the item used unbucketed: one mark per item, however it is split.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..buckets import home_bucket
from .bucket_states import by_home_state
from .client import Reservations
from .drain import with_group_lock
from .reconcile import (
    GroupCheck,
    Takes,
    _abandoned_repair,
    _compare,
    _oldest_seconds,
    _stock_drift,
    totals_stand_in,
    whole_marked,
)
from .values import GroupKeys, Pending, live_of, text_of, users_of

# How many times the states are read, at most, for two reads in a row between which no move
# ran: moves last milliseconds, and a crowd's borrowing comes in bursts.
STATES_READS = 6


@dataclass(frozen=True)
class _State:
    """One read of a state: its takes of every user together and units per row (``live``),
    the steps of moves it has run (``moves``), its stream, its outbox and the transfers it
    applied; ``fields``, the whole hash (each user's marks), only where the read was per
    user."""

    takes: int
    rows: dict[int, int]
    moves: int
    pending: list[Pending]
    outbox: Mapping
    applied: set[str]
    fields: Mapping = field(default_factory=dict)


def _read(reservations: Reservations, states: Sequence[int], *, per_user: bool) -> list[_State] | None:
    """Each state read in one MULTI, or None when one has no state."""
    found = []
    for state in states:
        keys = GroupKeys.of(state)
        pipe = reservations.multi(group_id=state)
        if per_user:
            pipe.hgetall(keys.state)
        else:
            pipe.hmget(keys.state, ["live", "moves"])
        pipe.xrange(keys.pending)
        pipe.hgetall(keys.outbox)
        pipe.hgetall(keys.applied)
        read, entries, outbox, applied = pipe.execute()
        fields = read if per_user else {}
        if per_user:
            named = {text_of(name): value for name, value in read.items()}
        else:
            named = dict(zip(("live", "moves"), read, strict=True))
        if named.get("live") is None:
            return None
        takes, rows = live_of(named["live"])
        found.append(
            _State(
                takes=takes,
                rows=rows,
                moves=int(named.get("moves") or 0),
                pending=[Pending.from_entry(state, entry_id, values) for entry_id, values in entries],
                outbox=outbox,
                applied={text_of(tid) for tid in applied},
                fields=fields,
            )
        )
    return found


def _rows_settled(
    reservations: Reservations, states: Sequence[int], stock: Mapping[int, int], first: list[_State], *, per_user: bool
) -> tuple[dict | None, list[_State] | None]:
    """The rows that differ, as two reads in a row found them with no move run at any state
    between its two reads (every state's ``moves`` the same): the first of the two is then
    what every state held at its end, a move in flight included once. None for the rows when
    moves ran through every read (nothing can be told: the next run reads again); with the
    last read, None when a state went missing."""
    before = first
    for _ in range(STATES_READS - 1):
        after = _read(reservations, states, per_user=per_user)
        if after is None:
            return None, None
        if all(one.moves == two.moves for one, two in zip(before, after, strict=True)):
            return _seen_twice(_rows_drift(before, states, stock), _rows_drift(after, states, stock)), after
        before = after
    return None, before


def _in_transit(found: list[_State], states: Sequence[int]) -> Counter:
    """Units per row in outbox entries whose receiver has not applied them."""
    applied = {state: one.applied for state, one in zip(states, found, strict=True)}
    units: Counter = Counter()
    for one in found:
        for tid, value in one.outbox.items():
            receiver, _, _, _, rows = (text_of(value).split(" ") + [""])[:5]
            if text_of(tid) in applied.get(int(receiver), set()):
                continue
            for pair in filter(None, rows.split(",")):
                row, count = pair.split(":")
                units[int(row)] += int(count)
    return units


def _pending(found: list[_State]) -> list[Pending]:
    return [entry for one in found for entry in one.pending]


def _rows_drift(found: list[_State], states: Sequence[int], stock: Mapping[int, int]) -> dict:
    """{stock id: (units in Redis, units expected)} of the rows that differ, every state's
    ``live`` and the units in transit together."""
    redis_units: Counter = _in_transit(found, states)
    for one in found:
        redis_units.update(one.rows)
    return _stock_drift(dict(redis_units), dict(stock), _pending(found))


def _seen_twice(rows: dict, again: dict) -> dict:
    """The rows of a second read that differ by as much as in the first: a move between two
    reads of the states shows once, a drift twice. By the difference, not the units: a
    reservation between the reads lowers a row's units in Redis and its units expected
    alike, and a drift on a row that sells must still be found."""
    return {row: seen for row, seen in again.items() if row in rows and _drift(rows[row]) == _drift(seen)}


def _drift(seen: tuple[int, int]) -> int:
    have, want = seen
    return have - want


def _users(found: list[_State], states: Sequence[int], takes: Takes) -> list[tuple]:
    """Each state's user comparison (check, missing, unused) against the records of the
    users whose home it is."""
    takers, seqs = takes
    seqs = set(seqs)
    users = []
    for bucket, (state, one) in enumerate(zip(states, found, strict=True)):
        marks = users_of(one.fields)
        at_home = {user: n for user, n in takers.items() if home_bucket(user, len(states)) == bucket}
        users.append(
            _compare(
                state,
                one.pending,
                redis_stock={},
                redis_takers={user: n for user, (n, _) in marks.items() if n > 0},
                redis_seqs={(user, n) for user, (_, numbers) in marks.items() for n in numbers},
                stock={},
                takers=at_home,
                seqs={(user, n) for user, n in seqs if home_bucket(user, len(states)) == bucket},
            )
        )
    return users


def _row_repairs(rows: dict, buckets: Mapping[int, int], lives: list[dict[int, int]]) -> list[dict[int, int]]:
    """Each state's repair of the rows: units missing go to the state of the row's bucket;
    units too many are taken where that row's units are, its own bucket's state first, so
    that no state keeps units to sell that the database does not have."""
    amounts: list[dict[int, int]] = [{} for _ in lives]
    for row, (have, want) in rows.items():
        home = buckets.get(row, 0)
        if want > have:
            amounts[home][row] = want - have
            continue
        surplus = have - want
        for at in [home] + [at for at in range(len(lives)) if at != home]:
            taken = min(surplus, max(0, lives[at].get(row, 0)))
            if taken:
                amounts[at][row] = -taken
                surplus -= taken
        if surplus:  # in transit only: taken from the row's own state, below zero
            amounts[home][row] = amounts[home].get(row, 0) - surplus
    return amounts


def states_check(
    *,
    group_id: int,
    states: Sequence[int],
    reservations: Reservations,
    database_stock: Callable[[], dict[int, int]],
    database_takes: Callable[[], Takes],
    database_takes_total: Callable[[], int],
    row_buckets: Callable[[], dict[int, int]],
    repair: bool = False,
    totals_first: bool = False,
    wait_seconds: float = 30,
    database_abandoned: Callable[[], dict[int, str]] | None = None,
    written_acknowledged: Callable[[], None] | None = None,
) -> GroupCheck:
    """Compare a bucketed item's states with the database, under the group's lock, and with
    ``repair`` set them right. ``row_buckets`` returns {stock id: bucket}. With
    ``totals_first``, each user is compared only when the totals differ or the last
    comparison per user is older than ``RESERVATIONS_RECONCILE_FULL_SECONDS``.
    ``database_abandoned``: as ``reconcile.group_check``'s, each user's count set in the
    user's home state, where RESERVE reads it."""

    def totals_agree() -> GroupCheck | None:
        if not reservations.client.exists(GroupKeys.of(group_id).checked):
            return None
        first = _read(reservations, states, per_user=False)
        if first is None:
            return GroupCheck(group_id=group_id, state=False)

        def rows_differ() -> bool:
            stock = database_stock()
            if not _rows_drift(first, states, stock):
                return False
            rows, last = _rows_settled(reservations, states, stock, first, per_user=False)
            # A state gone meanwhile: the comparison per user says so. Moves running through
            # every read: the totals of takes decide this run, the rows the next.
            return last is None or bool(rows)

        return totals_stand_in(
            group_id,
            checked=True,
            rows_differ=rows_differ,
            takes=sum(one.takes for one in first),
            database_takes_total=database_takes_total,
            pending=_pending(first),
        )

    def per_user() -> GroupCheck:
        first = _read(reservations, states, per_user=True)
        if first is None:
            return GroupCheck(group_id=group_id, state=False)
        stock, takes = database_stock(), database_takes()
        rows, users, last = _rows_drift(first, states, stock), _users(first, states, takes), first
        if rows or any(check.drifted for check, _, _ in users):
            rows, last = _rows_settled(reservations, states, stock, first, per_user=True)
            if last is None:
                return GroupCheck(group_id=group_id, state=False)
            users = _users(last, states, takes)
        pending = _pending(first)
        check = GroupCheck(
            group_id=group_id,
            state=True,
            stock=rows or {},
            takers={user: seen for one, _, _ in users for user, seen in one.takers.items()},
            seqs_missing=sum(one.seqs_missing for one, _, _ in users),
            seqs_unused=sum(one.seqs_unused for one, _, _ in users),
            pending=len(pending),
            oldest_pending_seconds=_oldest_seconds(pending),
        )
        if repair and (check.drifted or check.seqs_unused):
            amounts = _row_repairs(check.stock, row_buckets(), [one.rows for one in last])
            for bucket, (state, (user_check, missing, unused)) in enumerate(zip(states, users, strict=True)):
                reservations.repair(
                    group_id=state,
                    stock=amounts[bucket],
                    takers={user: want - have for user, (have, want) in user_check.takers.items()},
                    seqs=missing,
                    unused=unused,
                )
            check = replace(check, repaired=check.drifted)
        if repair and database_abandoned is not None:
            at_home = by_home_state(database_abandoned(), len(states))
            for state, wanted in zip(states, at_home, strict=True):
                _abandoned_repair(reservations, GroupKeys.of(state).abandoned, wanted)
        if rows is not None and (not check.drifted or check.repaired):
            whole_marked(reservations, group_id)
        return check

    def run() -> GroupCheck:
        if written_acknowledged is not None:
            written_acknowledged()
        return (totals_first and totals_agree()) or per_user()

    return with_group_lock(group_id, run, wait_seconds=wait_seconds)
