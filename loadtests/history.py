"""A run's history checked against its final state: pure functions over plain data (no
Django, no I/O), tested on their own (``tests/loadtests/test_history.py``).

The history is every take, pay, cancel, claim and restock a Locust process sent, with its
answer and when (``loadtests.history_log``); the final state is the item's records once the
run has drained (``loadtests.history_audit`` reads them). Three rules:

1. ``lost``: no acknowledged take, pay or claim is lost. Every take answered 201 or 202
   names a record that exists (a ``redis_lua`` 202's found by its reservation, or undone
   with a reason: ``failed``); every pay answered 200 names an order that ended paid, every
   claim answered 200 a draw that ended claimed.
2. ``sold out with stock free``: no take was refused ``sold_out`` or ``pool_empty`` while a
   unit was free throughout. The units free over time are rebuilt from the records' own
   moments and the history (``free_units``); a refusal over [start, end] is borne out when
   at some moment of that window, widened by ``CLOCK_MARGIN_SECONDS`` each side, no unit
   was free.
3. ``contradicted``: no answer contradicts the record it names, as far as the final state
   proves: a take names a record of its user (and a draw's, of the prize it announced),
   and no other take names the same record; a cancel answered 200 names a record that
   ended cancelled; a refusal that says what the record is (``already_paid``,
   ``cancelled``, ``expired``, ``already_claimed``, ``forfeited``) names a record that
   ended so (every one of those is final); but a refusal that the deadline passed, in
   flight at once with a settle of the same record that went through, is not judged: the
   server judges a deadline by the moment each request came (``payments.services.order_pay``).

It is not a linearizability check: each answer is checked against the final state and the
timeline of free units, not against one order of every operation that explains them all.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .common import OUT_OF_STOCK
from .history_log import RESTOCK, TAKE
from .verdict import POOL

# The server stamps a record's moments in its own process, a little before the commit
# that makes them visible (a sweep stamps a whole batch, then writes it; ``redis_lua``
# returns a unit to Redis after the commit), on the same clock as the Locust processes.
# A refusal is borne out by a moment with nothing free this close to it.
CLOCK_MARGIN_SECONDS = 0.5

LOST = "lost"
SOLD_OUT_WITH_STOCK = "sold out with stock free"
CONTRADICTED = "contradicted"
RULES = (LOST, SOLD_OUT_WITH_STOCK, CONTRADICTED)

TOOK = (201, 202)
# The unit key of a voucher's records: a pool's are keyed by prize.
VOUCHER_UNIT = 0
RELEASED = ("cancelled", "expired", "forfeited")
# What a 200 to a change says its record became.
DONE = {"pay": "paid", "cancel": "cancelled", "claim": "claimed"}
# The changes that settle a record, and the refusals that say its deadline passed.
SETTLES = ("pay", "claim")
LAPSED = ("expired", "forfeited")
# What a ``redis_lua`` reservation undone for good is: never a row, read from Redis.
FAILED = "failed"
# The refusals of a change that say what its record is, each a final status (an undone
# reservation is refused as cancelled: ``inventory.holds``).
REFUSAL_SAYS = {
    "already_paid": ("paid",),
    "cancelled": ("cancelled", FAILED),
    "expired": ("expired",),
    "already_claimed": ("claimed",),
    "forfeited": ("forfeited",),
}


@dataclass(frozen=True)
class Call:
    """One line of the history (``loadtests.history_log``)."""

    start: float
    end: float
    user: int | None
    action: str
    kind: str
    item: int
    status: int
    code: str | None
    record: int | None = None
    prize: int | None = None
    units: int = 0


@dataclass(frozen=True)
class Record:
    """A record as the run left it: ``id`` is the one the API answers with (its reservation's
    under ``redis_lua``), ``unit`` the unit it took (``VOUCHER_UNIT``, a prize id; None for a
    draw of no prize), moments in ``time.time()`` seconds."""

    id: int
    user: int
    status: str
    created: float
    released: float | None = None
    unit: int | None = VOUCHER_UNIT


@dataclass(frozen=True)
class Violation:
    rule: str
    call: Call
    why: str


def parse_history(lines: Iterable[str]) -> list[Call]:
    """The history's JSON lines as calls, in the order their answers came."""
    calls = []
    for line in lines:
        d = json.loads(line)
        calls.append(
            Call(
                start=d["start"],
                end=d["end"],
                user=d.get("user"),
                action=d["action"],
                kind=d["kind"],
                item=d["item"],
                status=d["status"],
                code=d.get("code"),
                record=d.get("record"),
                prize=d.get("prize"),
                units=d.get("units") or 0,
            )
        )
    return sorted(calls, key=lambda call: call.end)


def unit_of(call: Call) -> int | None:
    """The unit a take's answer says it took: a voucher's, the prize a draw won, or None."""
    return call.prize if call.kind == POOL else VOUCHER_UNIT


def unanswered(call: Call) -> bool:
    """A take that may have taken a unit with no answer naming it: none came (0), or a
    server error, or a body that was not one."""
    return call.action == TAKE and (call.status == 0 or call.status >= 500 or call.code == "error")


def free_units(
    calls: list[Call], records: Mapping[int, Record], supply: Mapping[int, int]
) -> tuple[list[float], list[int]]:
    """The units free over time, as steps: (moments, units free from each on), the first
    moment ``-inf``. ``supply`` is each unit key's units supplied at the end.

    A record holds its unit from its take's answer or its own creation, whichever came
    first (a ``redis_lua`` record is written after its 202: its reservation held the unit
    from the answer on), or, with no answer naming it, from the start of its user's
    earliest take that got none, if one started before it was created; until it was
    released, or until the answer to the cancel that released it, if that came later (a
    cancel stamps its moment when its request comes, then may wait on a lock for longer
    than any margin before its commit frees the unit). A take acknowledged for a record that
    does not exist (lost, or undone) holds its unit from its answer to the end. A restock
    adds its units when its answer came, or, with none, when the client gave up. Each of these errs towards fewer units
    free: a refusal is then found wrong only when it surely was."""
    answered_at: dict[int, float] = {}
    unit_named: dict[int, int | None] = {}
    cancelled_at: dict[int, float] = {}
    for call in calls:
        if call.action == TAKE and call.status in TOOK and call.record is not None:
            answered_at[call.record] = min(call.end, answered_at.get(call.record, call.end))
            unit_named.setdefault(call.record, unit_of(call))
        elif call.action == "cancel" and call.status == 200 and call.record is not None:
            cancelled_at[call.record] = max(call.end, cancelled_at.get(call.record, call.end))
    gave_up: dict[int, list[float]] = defaultdict(list)
    for call in calls:
        if unanswered(call) and call.user is not None:
            gave_up[call.user].append(call.start)

    events: list[tuple[float, int, int, int]] = []  # (moment, unit key, held, supplied)
    for record in records.values():
        if record.unit is None:
            continue
        if record.id in answered_at:
            held_from = min(record.created, answered_at[record.id])
        else:
            held_from = min([record.created, *(s for s in gave_up.get(record.user, ()) if s <= record.created)])
        events.append((held_from, record.unit, 1, 0))
        if record.status in RELEASED and record.released is not None:
            released = max(record.released, cancelled_at.get(record.id, record.released), held_from)
            events.append((released, record.unit, -1, 0))
    for record_id, at in answered_at.items():
        if record_id not in records and unit_named[record_id] is not None:
            events.append((at, unit_named[record_id], 1, 0))
    supplied = dict(supply)
    for call in calls:
        if call.action == RESTOCK and (call.status == 200 or call.status == 0) and call.units:
            supplied[VOUCHER_UNIT] = supplied.get(VOUCHER_UNIT, 0) - call.units
            events.append((call.end, VOUCHER_UNIT, 0, call.units))

    held: Counter[int] = Counter()
    free = sum(max(0, units) for units in supplied.values())
    moments, values = [float("-inf")], [free]
    for at, key, took, added in sorted(events):
        before = max(0, supplied.get(key, 0) - held[key])
        held[key] += took
        supplied[key] = supplied.get(key, 0) + added
        free += max(0, supplied[key] - held[key]) - before
        if at == moments[-1]:
            values[-1] = free
        else:
            moments.append(at)
            values.append(free)
    return moments, values


def free_throughout(moments: list[float], values: list[int], begin: float, end: float) -> bool:
    """Whether some unit was free at every moment from ``begin`` to ``end``."""
    first = bisect.bisect_right(moments, begin) - 1
    last = bisect.bisect_right(moments, end)
    return min(values[first:last]) > 0


def check_history(
    calls: list[Call],
    records: Iterable[Record],
    supply: Mapping[int, int],
    *,
    failed: Iterable[int] = (),
    margin: float = CLOCK_MARGIN_SECONDS,
) -> list[Violation]:
    """Every violation of the three rules (the module's docstring) by ``calls`` (one item's
    history) against its ``records`` at the end and its ``supply`` by unit key; ``failed``
    are the reservations ``redis_lua`` undone with a reason."""
    by_id = {record.id: record for record in records}
    failed = set(failed)
    violations: list[Violation] = []
    named: set[int] = set()
    settles: dict[int, list[Call]] = defaultdict(list)
    for call in calls:
        if call.action in SETTLES and call.status in (200, 202):
            settles[call.record].append(call)
    for call in calls:
        if call.action == TAKE and call.status in TOOK:
            violations += _took(call, by_id, failed, named)
        elif call.action in DONE and not _lapsed_in_a_race(call, settles.get(call.record, ())):
            record = by_id.get(call.record)
            violations += _changed(call, record.status if record else FAILED if call.record in failed else None)
    moments, values = free_units(calls, by_id, supply)
    for call in calls:
        if call.action == TAKE and call.code in OUT_OF_STOCK:
            if free_throughout(moments, values, call.start - margin, call.end + margin):
                violations.append(Violation(SOLD_OUT_WITH_STOCK, call, "a unit was free throughout"))
    return violations


def _took(call: Call, records: Mapping[int, Record], failed: set[int], named: set[int]) -> list[Violation]:
    record = records.get(call.record)
    if record is None:
        if call.status == 202 and call.record in failed:
            return []
        return [Violation(LOST, call, f"no record {call.record}")]
    if call.user is not None and record.user != call.user:
        if call.status == 202:
            # A reservation lost with the Redis that held it (restarted empty, or a master
            # failed over with no WAIT), whose id a later reservation was given: lost, and set
            # aside as such where the fault loses 202s by design.
            return [Violation(LOST, call, f"reservation {call.record} lost; its id went to user {record.user}")]
        return [Violation(CONTRADICTED, call, f"record {call.record} is user {record.user}'s")]
    if call.record in named:
        return [Violation(CONTRADICTED, call, f"record {call.record} named by another take too")]
    named.add(call.record)
    if call.kind == POOL and record.unit != call.prize:
        return [Violation(CONTRADICTED, call, f"record {call.record} won prize {record.unit}, not {call.prize}")]
    return []


def _lapsed_in_a_race(call: Call, settles: Iterable[Call]) -> bool:
    """A refusal ``expired`` or ``forfeited`` while a settle of the same record, in flight at
    once, went through: the server judges a deadline by the moment each request came, so
    of a volley straddling it the one sent before it settles and those after it hear the
    deadline passed, whatever the record ends as."""
    return call.code in LAPSED and any(s.start < call.end and call.start < s.end for s in settles)


def _changed(call: Call, status: str | None) -> list[Violation]:
    """``status``: what the record named ended as (None: no record of the item)."""
    status = status or "missing"
    if call.status == 200:
        if status == DONE[call.action]:
            return []
        # An acknowledged cancel left undone contradicts its answer; a pay or claim is lost.
        rule = CONTRADICTED if call.action == "cancel" else LOST
        return [Violation(rule, call, f"answered {DONE[call.action]}, record {call.record} ended {status}")]
    said = REFUSAL_SAYS.get(call.code or "")
    if call.status == 409 and said is not None and status not in said:
        return [Violation(CONTRADICTED, call, f"refused {call.code}, record {call.record} ended {status}")]
    return []


def counted(violations: Iterable[Violation]) -> dict[str, int]:
    """How many violations of each rule, every rule named."""
    counts = Counter(violation.rule for violation in violations)
    return {rule: counts[rule] for rule in RULES}
