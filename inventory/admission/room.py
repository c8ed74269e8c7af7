"""An item's waiting room (``admission`` ``queue``): joining its line, polling it, and spending
and giving back the ticket it admits a buyer with (``inventory.admission.scripts``).

Admission is lazy: there is no process that admits anyone. Every join and every poll of the
item moves its room forward to now by one script call, admitting from the head of the line as
many as the rate has earned since the last call, up to the units not yet promised; a room that
nobody polls has nobody to admit. Those near the head poll at their own turn and those further
back every few seconds (``Standing.poll_after_seconds``), so a ticket's lifetime starts within
a poll of its admission, and the admitted reach the take one by one, at the item's rate.

The room runs on Redis' clock, read by its scripts, never on a web process's
(``inventory.admission.scripts``); ``now`` is a test's moment.

The units left are read at most twice a second per process: a ``redis_lua`` item's from its
states in Redis, which every take reserves from at once, and any other item's from the
database (its stock rows, summed), which its takes write to. Between readings the room counts
the tickets spent, so that units taken are not promised again. Read from the database, a
``redis_lua`` item's units lagged its takes by as long as its drains took to write them, and
every reading forgot the tickets spent meanwhile: under a crowd, the room admitted hundreds
more than the units left, each to find the item sold out. The take decides, under the item's
strategy; the room only orders who asks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from math import ceil
from typing import Any

from django.db.models import Sum
from django.shortcuts import get_object_or_404
from django.utils import timezone

from core.memo import ProcessMemo
from core.ratelimit import RateCount, rate_client, rate_refuse

from ..models import Stock
from ..product import Product
from ..records import Admission
from ..redis_lua.bucket_states import item_states
from ..redis_lua.client import reservations_client
from ..redis_lua.closing import item_keeps_state
from ..redis_lua.item_buckets import item_bucketed
from ..redis_lua.values import GroupKeys, stock_of
from .keys import RoomKeys, room_client, room_script
from .scripts import ADVANCE
from .tickets import Ticket, TicketHeld, ticket_read

# (kind, item id) -> (units left, when read by Redis' clock in ms), read again after this long.
UNITS_READ_SECONDS = 0.5
_units: ProcessMemo[tuple[str, int], tuple[int, int, int]] = ProcessMemo(ttl=UNITS_READ_SECONDS)

# The most admissions the rate banks while nobody polls: a second's worth. More would let the
# first poll after a quiet spell send that many buyers to the take at once; those waiting poll
# often enough that a second's worth is earned between any two polls. A room's first move after
# the opening banks one admission, for a first joiner, unless a lobby waits (``scripts.ADVANCE``).
BURST_SECONDS = 1.0

# A new room's ticket serials start at a random number of this many bits (``scripts.ADVANCE``):
# exact in Redis' Lua numbers after any count of admissions a room could make (2^53).
SERIAL_BITS = 50

# How soon those waiting are asked to poll again (``Standing.poll_after_seconds``).
POLL_SECONDS = 1
POLL_SECONDS_MOST = 5
POLL_SECONDS_LEAST = 0.05

# The longest a lobby's polls at the opening are spread over (``room_enter``).
LOBBY_SPREAD_SECONDS = 2.0

_STATES = {1: "waiting", 3: "sold_out"}


@dataclass(frozen=True)
class Standing:
    """Where a user stands in an item's room: ``status`` (``waiting``, ``admitted``,
    ``sold_out``, ``closed``); while waiting after the opening, ``position`` (1 is next) and
    ``ahead``; the estimated wait; the ticket once admitted, and its deadline."""

    status: str
    position: int | None = None
    ahead: int | None = None
    eta_seconds: int | None = None
    ticket: str | None = None
    ticket_expires_at: datetime | None = None
    waiting: int = 0
    # Seconds until the user's turn at the room's rate (until the opening, in the lobby), to
    # the hundredth: what ``eta_seconds`` rounds up.
    turn_in: float = 0.0
    # Asked back at ``turn_in`` whatever it is: a lobby near the opening, whose turns are drawn
    # past it (``room_enter``) and may lie more than ``2 * POLL_SECONDS`` away.
    at_turn: bool = False

    @property
    def poll_after_seconds(self) -> float | None:
        """When to ask again, while waiting or sold out (a unit may come back); None once
        admitted or closed. Within ``2 * POLL_SECONDS`` of the turn: at the turn itself, so
        that those near the head come one by one, at the rate, and go to the take one by one;
        asked to come back at whole seconds they would all come at once, and a second's
        admissions would reach the take together. Further back: at half the wait, from
        ``POLL_SECONDS`` to ``POLL_SECONDS_MOST``, since a crowd polling at a fixed pace would
        cost the server more, the longer the line, than the take it waits for."""
        if self.status not in ("waiting", "sold_out"):
            return None
        if self.status == "waiting" and (self.at_turn or self.turn_in < 2 * POLL_SECONDS):
            return round(max(POLL_SECONDS_LEAST, self.turn_in), 2)
        return round(min(POLL_SECONDS_MOST, max(POLL_SECONDS, self.turn_in / 2)), 2)

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "position": self.position,
            "ahead": self.ahead,
            "eta_seconds": self.eta_seconds,
            "ticket": self.ticket,
            "ticket_expires_at": self.ticket_expires_at,
            "poll_after_seconds": self.poll_after_seconds,
        }


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def room_now() -> datetime | None:
    """The moment the room moves to when its caller names none: None, Redis' clock. A test that
    drives the room through the API and moves time itself puts its own clock here (``tests/model``)."""
    return None


def _moment(now: datetime | None) -> int | str:
    """The moment a script moves the room to, or checks a ticket at: ``now``, else
    :func:`room_now`'s; "" for Redis' clock."""
    now = now or room_now()
    return "" if now is None else _ms(now)


# (kind, item id) -> the item as its room reads it, for a second per process: its window and
# its admission settings, which staff change rarely; every join and poll would read it again.
_queued: ProcessMemo[tuple[str, int], Any] = ProcessMemo(ttl=1.0)


def item_for_queue(product: Product, *, item_id: int) -> Any:
    """The item (``Http404`` when there is none) as its room needs it, kept a second in this
    process: a change of its settings reaches every process's joins and polls within it."""
    key = (product.kind, item_id)
    item = _queued.get(key)
    if item is None:
        item = get_object_or_404(product.items(), pk=item_id)
        _queued.put(key, item)
    return item


def item_for_queue_forget(product: Product | None = None, item_id: int | None = None) -> None:
    """Read the item (every item, without one) again at its room's next join or poll in this process."""
    if product is None or item_id is None:
        _queued.clear()
    else:
        _queued.forget((product.kind, item_id))


def units_left(product: Product, item: Any) -> tuple[int, int, int]:
    """The item's units left (:func:`units_held`), when they were read, by Redis' clock (ms),
    and the room's tickets used as they stood just before: kept :data:`UNITS_READ_SECONDS` in
    this process. Stamped once, by the room's clock, so that the room orders every process's
    readings alike, and knows one reading sent again for the same. The tickets used are read
    first: a take that spends its ticket and its unit at once between the two reads is then
    counted twice, a moment's under-count, where the room's count taken when it moved counted
    it in neither, and promised its unit again."""
    key = (product.kind, item.pk)
    reading = _units.get(key)
    if reading is None:
        client = room_client()
        used = client.hget(RoomKeys.of(product.kind, item.pk).room, "used")
        seconds, micros = client.time()
        units = units_held(product, item)
        reading = (units, seconds * 1000 + micros // 1000, int(used or 0))
        _units.put(key, reading)
    return reading


def units_held(product: Product, item: Any) -> int:
    """The item's units left: a ``redis_lua`` item's as its states hold them, where Redis holds
    every one (units moving between two buckets' states are in neither: a moment's under-count),
    else as its stock rows do."""
    if item_keeps_state(item):
        reservations = reservations_client()
        pipe = reservations.client.pipeline(transaction=False)
        for state in item_states(product.group_of(item), item_bucketed(product, item)):
            pipe.hget(GroupKeys.of(state).state, "live")
        held = [stock_of(live) for live in pipe.execute()]
        if all(stock is not None for stock in held):
            return sum(max(units, 0) for stock in held for units in stock.values())
    units = Stock.objects.filter(group_id=product.group_of(item)).aggregate(units=Sum("quantity"))["units"]
    return max(units or 0, 0)


def units_forget(product: Product, item_id: int) -> None:
    """Read the item's units again at its room's next move (a test's restock, a take it waits on)."""
    _units.forget((product.kind, item_id))


def advance_args(product: Product, item: Any, user_id: int, join: bool, moment: int | str) -> list:
    """The ``ADVANCE`` script's ARGV for ``user_id`` in the item's room at ``moment`` (:func:`_moment`)."""
    units, units_ms, used = units_left(product, item)
    rate = float(item.admission_rate)
    return [
        moment,
        _ms(item.begin_at),
        repr(rate),
        repr(max(1.0, rate * BURST_SECONDS)),
        item.admission_ticket_seconds * 1000,
        units,
        units_ms,
        user_id,
        int(join),
        repr(random.random()),
        random.getrandbits(SERIAL_BITS),
        _ms(item.end_at) + item.admission_ticket_seconds * 1000,
        used,
    ]


def room_join_many(product: Product, item: Any, user_ids, *, now: datetime | None = None, batch: int = 1000) -> None:
    """Join every one of ``user_ids`` to the item's line, as many joins would, pipelined: for
    the benchmarks and tests that fill a room."""
    client = room_client()
    advance = client.register_script(ADVANCE)
    keys = RoomKeys.of(product.kind, item.pk).all
    moment = _moment(now)
    pipe = client.pipeline(transaction=False)
    for n, user_id in enumerate(user_ids, 1):
        advance(keys=keys, args=advance_args(product, item, user_id, True, moment), client=pipe)
        if n % batch == 0:
            pipe.execute()
    pipe.execute()


def units_forget_all() -> None:
    _units.clear()


def room_enter(
    product: Product,
    item: Any,
    *,
    user_id: int,
    join: bool,
    now: datetime | None = None,
    rate: RateCount | None = None,
) -> Standing | None:
    """Move the item's room to ``now`` and say where ``user_id`` stands in it; with ``join``,
    the user joins its line first unless already in it or admitted (idempotent). None when
    polled (``join`` False) by a user who is neither waiting nor admitted: never joined, or
    whose ticket was spent or lapsed. An ``open`` item admits everyone: ``admitted`` with no
    ticket, none being needed. Where the room moves, ``rate``'s limits are counted first, on
    the room's hash tag: in the same round trip where they live in the room's Redis, else in
    one of their own; over one, ``RateLimited``, the room not moved."""
    if item.admission == Admission.OPEN:
        # No room to ask: the process's clock says whether the sale has ended, as a take's window.
        ended = (now or room_now() or timezone.now()) >= item.end_at
        return Standing(status="closed") if ended else Standing(status="admitted", eta_seconds=0)
    room = RoomKeys.of(product.kind, item.pk)
    keys, args = room.all, advance_args(product, item, user_id, join, _moment(now))
    if rate is not None and rate_client() is room_client():
        keys, args = keys + rate.keys(tag=room.hash_tag), args + rate.args()
    elif rate is not None:
        rate.count(tag=room.hash_tag)
    answer = room_script(ADVANCE)(keys=keys, args=args)
    if int(answer[0]) == 5:
        rate_refuse(int(answer[1]))
    if int(answer[0]) == 6:
        return Standing(status="closed")
    state, rank, size, serial, deadline, credit, blocked, now_ms = answer
    state, rank, size, now_ms = int(state), int(rank), int(size), int(now_ms)
    if state == 4:
        return None
    if state == 2:
        ticket = Ticket(product.kind, item.pk, user_id, int(serial), int(deadline))
        return Standing(
            status="admitted",
            ticket=ticket.signed(),
            ticket_expires_at=datetime.fromtimestamp(int(deadline) / 1000, tz=UTC),
            eta_seconds=0,
            waiting=size,
        )
    if rank < 0:
        # In the lobby: the order is drawn at the opening; the wait is until then, at least.
        # Asked back at the opening itself, the whole lobby would come in its first instant:
        # each is asked back at a moment drawn over the time the lobby's admissions take at
        # the rate, up to LOBBY_SPREAD_SECONDS (well within a ticket's shortest lifetime).
        until_opening = max(0.0, (_ms(item.begin_at) - now_ms) / 1000)
        turn_in, near = until_opening, until_opening < 2 * POLL_SECONDS
        if near:
            turn_in += random.uniform(0, min(LOBBY_SPREAD_SECONDS, size / float(item.admission_rate)))
        eta = ceil(until_opening)
        return Standing(status=_STATES[state], eta_seconds=eta, waiting=size, turn_in=round(turn_in, 2), at_turn=near)
    # The user is admitted once the rate has earned rank + 1 admissions; half of one more keeps
    # a poll at the turn from coming a moment early. While every unit left is promised to a
    # ticket still out, the rate admits no one, whatever it has earned: the head's turn comes
    # when the first of those tickets lapses (unless a unit comes back first), and the rest
    # follow at the rate; told their earned turn, the head would poll at the least interval
    # until then.
    rate = float(item.admission_rate)
    if int(blocked):
        wait = max(0.0, (int(blocked) - now_ms) / 1000) + rank / rate
        eta, turn_in = ceil(wait), wait + POLL_SECONDS_LEAST
    else:
        to_earn = rank + 1 - float(credit)
        eta, turn_in = max(0, ceil(to_earn / rate)), max(0.0, (to_earn + 0.5) / rate)
    return Standing(
        status=_STATES[state], position=rank + 1, ahead=rank, eta_seconds=eta, waiting=size, turn_in=round(turn_in, 2)
    )


def ticket_held(
    product: Product, item: Any, *, user_id: int, ticket: str | None, now: datetime | None = None
) -> TicketHeld:
    """For a take of ``item`` by ``user_id`` (an item whose admission is ``queue``; an
    ``open`` one's takes need nothing), to run in: ``ticket`` read (``NotAdmitted``, 403,
    unless its signature is good, for this user and item), to be spent by the take
    (``TicketHeld``), which the room refuses once lapsed, by Redis' clock."""
    read = ticket_read(ticket, kind=product.kind, item_id=item.pk, user_id=user_id)
    return TicketHeld(RoomKeys.of(product.kind, item.pk), user_id, read.serial, _moment(now))


def room_clear(product: Product, item_id: int) -> None:
    """Forget the item's room: its line, its tickets and its counters (an item deleted, a test)."""
    room_client().delete(*RoomKeys.of(product.kind, item_id).all)
    units_forget(product, item_id)
