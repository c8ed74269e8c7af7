"""What the reservations of ``redis_lua`` are made of in Redis: their ids, the keys of a stock
group, the rules a reservation is checked against, and the values the scripts answer and
the stream holds (``inventory.redis_lua.client`` runs the scripts over them).

Plain Python: of the settings only the instance namespace, which every key starts with
(``core.namespace``).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime

from core.namespace import key_prefix

from .slots import bucket_tag

# The consumer group that persists pending reservations to the database.
PERSIST_GROUP = "persist"
# How idle a handed-back entry looks (a day): past any consumer's claim_idle_ms.
HANDED_BACK_IDLE_MS = 24 * 3600 * 1000
USER_TAKES_READ = 1000  # a user's list reads their latest this many takes of an item


def taken_field(user_id: int, take: int) -> str:
    """The state's field holding a waiting take's reservation number, as RESERVE writes it."""
    return f"r:{user_id}:{take}"


# Reservation ids: 2**62 + (state id << 30) + the state's reservation number (a state id is the
# group's own id for an unbucketed group): unique across states, above the database's own
# ids, and made in the script without a second round trip.
RESERVATION_BASE = 1 << 62
_NUMBER_BITS = 30


def reservation_id(group_id: int, number: int) -> int:
    """The id of the ``number``-th reservation of stock group ``group_id``."""
    if not 0 < number < 1 << _NUMBER_BITS or not 0 < group_id < 1 << (62 - _NUMBER_BITS):
        raise ValueError(f"no reservation id for group {group_id}, number {number}")
    return RESERVATION_BASE | group_id << _NUMBER_BITS | number


def state_reservations(state: int) -> tuple[int, int]:
    """The range [first, past the last) of the reservation ids a state hands out: what a load
    of that state reads its last number from, and no other state's (an earlier layout's)."""
    first = reservation_id(state, 1)
    return first, first - 1 + (1 << _NUMBER_BITS)


# How far a counter that Redis lost starts past every number an earlier load of its state
# could have handed out: more reservations than can wait unwritten at once (bounded by a
# sale's stock and draws); 2**30 numbers per state leave room for a thousand such losses.
LOST_NUMBERS_GAP = 1 << 20


def lost_counter_floor(database_floor: int, lost_before: int = 0) -> int:
    """Where a state's counter that Redis lost starts again: LOST_NUMBERS_GAP above both the
    database's last number and the floor the state's last lost counter started from
    (``lost_before``), since what Redis answered past either may be gone with it."""
    return max(database_floor, lost_before) + LOST_NUMBERS_GAP


def reservation_group(reservation: int) -> int | None:
    """The state (an unbucketed group's id, else ``state_id``) whose stream holds a
    reservation id, or None for any other id: one in the
    range that ``reservation_id`` never makes (group 0, number 0) is no reservation's, and
    its callers answer it as they answer any id that names nothing."""
    if reservation < RESERVATION_BASE or reservation >= 1 << 63:
        return None
    group_id, number = divmod(reservation - RESERVATION_BASE, 1 << _NUMBER_BITS)
    return group_id if group_id and number else None


# State ids: the state of a group's bucket 0 (an unbucketed group's only state) is named by
# the group's id; bucket b >= 1 of group g by 2**31 | b << 25 | g. A reservation id carries
# its state's id (``reservation_id``), so ``reservation_group`` names the state whose stream
# holds it, and every lookup reads one slot as before. A bucketed group's id is below 2**25
# and any group's below 2**31, so the two kinds never meet.
_BUCKET_STATE = 1 << 31
_BUCKET_SHIFT = 25
_BUCKET_MAX = 63  # six bits; Item.buckets stops at 64


def state_id(group_id: int, bucket: int = 0) -> int:
    """The id of the state of a group's ``bucket``: the group's own id for bucket 0."""
    if not 0 < group_id < _BUCKET_STATE:
        raise ValueError(f"no redis_lua state for group {group_id}: ids stop below 2**31")
    if bucket == 0:
        return group_id
    if not 0 < bucket <= _BUCKET_MAX or group_id >= 1 << _BUCKET_SHIFT:
        raise ValueError(
            f"no redis_lua state for bucket {bucket} of group {group_id}: a bucketed group's id stops below 2**25"
        )
    return _BUCKET_STATE | bucket << _BUCKET_SHIFT | group_id


def state_of(state: int) -> tuple[int, int]:
    """The group and the bucket a state id names (``state_id`` reversed)."""
    if state < _BUCKET_STATE:
        return state, 0
    return state & ((1 << _BUCKET_SHIFT) - 1), (state - _BUCKET_STATE) >> _BUCKET_SHIFT


def bucketed_states_allowed(group_id: int, buckets: int) -> bool:
    """Whether a group can have ``buckets`` states of its own (its id small enough)."""
    return buckets <= 1 or (group_id < 1 << _BUCKET_SHIFT and buckets <= _BUCKET_MAX + 1)


def group_tag(group_id: int) -> str:
    """The hash tag of a state's keys (``group_id`` a state id): every key under it is in one
    Cluster slot, ``{group:<g>}`` for a group's bucket 0, ``{group:<g>:<b>:<n>}`` for bucket b,
    n chosen for the slot, so that an item's states spread evenly over the slots and a
    cluster's masters (``inventory.redis_lua.slots``)."""
    return "{" + bucket_tag(*state_of(group_id)) + "}"


@dataclass(frozen=True)
class GroupKeys:
    """The keys of one stock group, under one hash tag (one Cluster slot). ``takers``,
    ``seqs`` and ``kick`` are the earlier layout's, which LOAD and DROP remove."""

    state: str
    takers: str
    pending: str
    ids: str
    failed: str
    seqs: str
    kick: str
    rebuild: str
    # Set, with an expiry, by a reconciliation that compared each user's takes and found the
    # group whole: until it expires the beat's may compare totals only
    # (``inventory.redis_lua.reconcile``).
    checked: str
    # A bucketed item's transfers of units between its states (``inventory.redis_lua.transfers``):
    # ``outbox`` in the giving state, ``applied`` in the receiving one.
    outbox: str
    applied: str
    # Each user's abandoned holds of the item and when the last was, ``<holds>:<ms>``
    # (``abandoned_value``): what RESERVE checks the cap and the cooldown against.
    abandoned: str

    @classmethod
    @functools.lru_cache(maxsize=1024)  # every reservation names them: built once per group
    def of(cls, group_id: int) -> GroupKeys:
        tag = f"{key_prefix()}res:{group_tag(group_id)}"
        return cls(
            state=f"{tag}:state",
            takers=f"{tag}:takers",
            pending=f"{tag}:pending",
            ids=f"{tag}:ids",
            failed=f"{tag}:failed",
            seqs=f"{tag}:seqs",
            kick=f"{tag}:kick",
            rebuild=f"{tag}:rebuild",
            checked=f"{tag}:checked",
            outbox=f"{tag}:outbox",
            applied=f"{tag}:applied",
            abandoned=f"{tag}:abandoned",
        )

    def all(self) -> list[str]:
        return [getattr(self, key.name) for key in fields(self)]


@dataclass(frozen=True)
class Rules:
    """What RESERVE checks besides the stock.

    Attributes:
        begin_at, end_at: the sale window, compared with Redis' clock.
        limit: takes per user (1 for a voucher, the draw limit for a pool).
        no_take: the weight of taking nothing (a pool's "no prize"), 0 for a voucher.
        abandon_limit, abandon_cooldown: the item's cap on a user's abandoned holds and the
            cooldown after each, in seconds (docs/design.md, "Abandoned holds"; 0: none).
        states: how many states the item's takes are spread over (its buckets, 1 unbucketed):
            a take routed by another number, from an item read before a rebucket, is refused
            ``moved`` rather than judged by a state that does not keep its user's takes.
        hold_seconds: the item's hold window, so that a record is written with the window its take
            was made under (``inventory.redis_lua.windows``; None: not carried).
    """

    begin_at: datetime
    end_at: datetime
    limit: int
    no_take: int = 0
    abandon_limit: int = 0
    abandon_cooldown: int = 0
    states: int = 1
    hold_seconds: int | None = None


@dataclass(frozen=True)
class Reserved:
    """What RESERVE answered: ``refusal`` is None when a unit (or nothing, by the weight
    of taking nothing) was reserved, else one of ``REFUSALS``; ``seq`` is the take's
    number among the user's takes of this group (1 for a voucher's one purchase),
    ``takes`` the user's takes now, ``limit`` the limit of takes it was checked against
    (the state's, which a memo of the item may not know yet), ``reservation_id`` the id its record will have once
    persisted, and ``kick`` whether the caller should ask a worker to persist the
    group's reservations (see ``inventory.redis_lua.scripts``, the kick flag);
    ``unconfirmed`` when the client waits for replicas and fewer than it asked for had the
    reservation in time (it was made all the same, on the master)."""

    refusal: str | None
    stock_id: int | None = None
    seq: int = 0
    takes: int = 0
    reservation_id: int = 0
    kick: bool = False
    wait_ms: int = 0  # rate_limited: how long until the request's limits allow it
    limit: int = 0
    unconfirmed: bool = False


REFUSALS = (
    "rate_limited", "unavailable", "moved", "not_admitted", "not_started", "ended", "limit", "abandon_limit",
    "cooling_down", "sold_out", "busy",
)  # fmt: skip


class PendingReservations(Exception):
    """A state cannot be loaded while reservations wait in the stream: the database, which
    the state is built from, does not hold them yet."""


@dataclass(frozen=True)
class Pending:
    """A reservation waiting to be persisted: its stream entry and what RESERVE recorded (``at_ms``: when, by Redis'
    clock; ``request_id``: the request that made it, "" for none; ``hold_seconds``: the item's hold window in force
    then, as ``windows.windows_read`` finds it, None where the state cannot say)."""

    entry_id: str
    reservation_id: int
    user_id: int
    stock_id: int | None
    seq: int
    at_ms: int
    request_id: str = ""
    hold_seconds: int | None = None

    @classmethod
    def from_entry(cls, group_id: int, entry_id, fields: Mapping) -> Pending:
        values = {text_of(name): text_of(value) for name, value in fields.items()}
        entry_id = text_of(entry_id)
        return cls(
            entry_id=entry_id,
            reservation_id=reservation_id(group_id, int(entry_id.split("-")[0])),
            user_id=int(values["user"]),
            stock_id=int(values["stock"]) if values["stock"] else None,
            seq=int(values["seq"]),
            at_ms=int(values["at"]),
            # Absent from an entry written before the field existed.
            request_id=values.get("rid", ""),
        )


@dataclass(frozen=True)
class Failed:
    """A reservation that was undone: whose, the row it had taken, when it was made
    (``at_ms``, Redis' clock) and why."""

    reservation_id: int
    user_id: int
    stock_id: int | None
    at_ms: int
    why: str

    @classmethod
    def from_field(cls, group_id: int, number, value) -> Failed:
        user, stock, at_ms, why = text_of(value).split(":", 3)
        return cls(
            reservation_id=reservation_id(group_id, int(text_of(number))),
            user_id=int(user),
            stock_id=int(stock) if stock else None,
            at_ms=int(at_ms),
            why=why,
        )


# Persisted, as far as Redis knows: neither waiting nor undone (the database has the record).
SETTLED = "settled"


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


# The layout of a group's state hash that the scripts read (``inventory.redis_lua.scripts``): the first
# number of its ``rules`` field. Its numbers are big-endian doubles: ``rules`` eight (five in a state loaded before
# abandoned holds were capped: RESERVE reads those as no cap; seven in one loaded before it said its number of states:
# RESERVE checks no caller's), then the hold window in seconds as text (none in a state loaded before it was: read by
# SET_RULES, never by RESERVE); ``live`` four, then two per row.
STATE_LAYOUT = 3
_RULES, _LIVE, _ROW = struct.Struct(">dddddddd"), struct.Struct(">dddd"), struct.Struct(">dd")


def rules_value(rules: Rules) -> bytes:
    """The state's ``rules`` field: the layout, the window, the limit, the weight of nothing, the cap on abandoned
    holds, the cooldown after each (ms), the item's number of states and its hold window."""
    hold = b"" if rules.hold_seconds is None else b"%d" % rules.hold_seconds
    return (
        _RULES.pack(
            STATE_LAYOUT,
            _ms(rules.begin_at),
            _ms(rules.end_at),
            rules.limit,
            rules.no_take,
            rules.abandon_limit,
            rules.abandon_cooldown * 1000,
            rules.states,
        )
        + hold
    )


def rules_states(value: bytes | None, *, older: bytes | None = None) -> int:
    """The item's number of states a state's ``rules`` field says (``rules_value``); for rules
    of a state loaded before they held it, the ``states`` field then written (``older``); 1
    for neither."""
    if value and len(value) >= _RULES.size:
        return int(_RULES.unpack_from(value)[-1])
    return int(older) if older else 1


def abandoned_value(holds: int, last_at: datetime | None) -> str:
    """A user's field of the state's abandoned holds (``GroupKeys.abandoned``): ``<holds>:<ms>``,
    the count and when the last was released (0: never)."""
    return f"{holds}:{0 if last_at is None else _ms(last_at)}"


def rows_value(stock: Mapping[int, int]) -> bytes:
    """The rows of the state's ``live`` field: each row's stock id and units, ascending."""
    return b"".join(_ROW.pack(stock_id, units) for stock_id, units in sorted(stock.items()))


def marks_value(takes: int, numbers: Iterable[int]) -> str:
    """A user's field of the state: ``<k>`` for k takes numbered 1 to k, else
    ``<k>:<n>,<n>,...``."""
    numbers = sorted(set(numbers))
    if numbers == list(range(1, takes + 1)):
        return str(takes)
    return f"{takes}:" + ",".join(map(str, numbers))


def marks_of(value) -> tuple[int, list[int]]:
    """A user's takes and the take numbers they use, from their field of the state."""
    takes, colon, listed = text_of(value).partition(":")
    if not colon:
        return int(takes), list(range(1, int(takes) + 1))
    return int(takes), [int(n) for n in listed.split(",") if n]


def live_of(live: bytes | None) -> tuple[int, dict[int, int]] | None:
    """The takes of every user together and the units per row, from the state's ``live``
    field; None for no state."""
    if live is None:
        return None
    _, takes, _, _ = _LIVE.unpack_from(live)
    rows = (_ROW.unpack_from(live, at) for at in range(_LIVE.size, len(live), _ROW.size))
    return int(takes), {int(stock_id): int(units) for stock_id, units in rows}


def numbered_of(live: bytes | None) -> int:
    """The group's last reservation number, from the state's ``live`` field; 0 for no state."""
    return 0 if live is None else int(_LIVE.unpack_from(live)[0])


def stock_of(live) -> dict[int, int] | None:
    """The units per row, from the state's ``live`` field; None for no state."""
    found = live_of(live)
    return None if found is None else found[1]


def users_of(state: Mapping) -> dict[int, tuple[int, list[int]]]:
    """User id -> (takes, take numbers in use), from the state hash as HGETALL answers it."""
    return {int(name): marks_of(value) for name, value in state.items() if text_of(name).isdigit()}


def takers_of(state: Mapping) -> dict[int, int]:
    """User id -> takes, of the users with any, from the state hash as HGETALL answers it."""
    return {user: takes for user, (takes, _) in users_of(state).items() if takes > 0}


def text_of(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def reservation_moment(found: Pending | Failed) -> datetime:
    """When the reservation was made, by Redis' clock: a pending record's creation, and
    where a hold's deadline counts from."""
    return datetime.fromtimestamp(found.at_ms / 1000, tz=UTC)
