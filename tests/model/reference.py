"""The reference models, in plain Python: what each buyer holds, the units left and supplied
(per prize, for a pool), each hold's deadline. The state machines (``tests/model/``) tell a
model each answer the application gave; it asserts the answer is one the rules allow, then
moves as the application should have. ``Ledger`` is what both products share; ``Sale`` is a
voucher's (pay, cancel, the provider's confirmations), ``tests.model.pool_reference.Draws`` a
pool's.

Where the rules leave a choice (a cancel sent after the deadline but before the expiry ran
is refused as expired or done, by when the strategy looks), the model accepts each allowed
answer and follows the one given; the records are compared after every step all the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from django.utils.dateparse import parse_datetime

# Answers a key does not keep: a retry under it runs afresh (docs/api.md, "Idempotency keys").
# A take refused at a waiting room's door is sent again with its ticket.
NOT_KEPT = {(409, "busy"), (409, "pending"), (503, "unavailable"), (429, "rate_limited"), (403, "not_admitted")}
# A take's answers that ask to be sent again, nothing done: its admission ticket stays good.
ASKS_AGAIN = {(409, "busy"), (503, "unavailable"), (429, "rate_limited")}
# A voucher's units are all one: its records' unit key.
ONE = 0
# {the id the buyer was answered: (status, hold_until to the millisecond, unit key)}.
Written = dict[int, tuple[str, datetime | None, int | None]]


@dataclass(frozen=True)
class Answer:
    status: int
    code: str | None
    body: dict[str, Any]


@dataclass
class Unit:
    """A record (an order, a draw) as the model knows it; ``unit`` is the stock it took (a
    prize's id, ``ONE`` for a voucher's), None for a draw of no prize."""

    record_id: int
    buyer: int
    status: str
    hold_until: datetime | None = None
    unit: int | None = ONE

    def due(self, now: datetime) -> bool:
        return self.status == "held" and self.hold_until is not None and self.hold_until <= now


@dataclass
class Ticket:
    """An admission ticket the waiting room gave a buyer, until ``lapses``; ``spent`` once a
    take used it. ``lost``: Redis lost the room's record of it, and it is refused for good: the
    room numbers its tickets afresh from another random start, so the buyer's next admission
    (at a join of anyone's: the model does not follow the line) is never its number again."""

    value: str
    lapses: datetime
    spent: bool = False
    lost: bool = False

    def good(self, now: datetime) -> bool:
        return not self.spent and not self.lost and now < self.lapses


@dataclass
class Ledger:
    stock: dict[int, int]
    abandon_limit: int
    deferred: bool
    records: list[Unit] = field(default_factory=list)
    abandons: dict[int, int] = field(default_factory=dict)
    # Whether the item has a waiting room, and the last ticket it gave each buyer.
    queued: bool = False
    tickets: dict[int, Ticket] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.left = dict(self.stock)
        self.supplied = dict(self.stock)
        # redis_lua's state went with a Redis restart, and nothing rebuilt it yet.
        self.state_lost = False

    def record_at(self, pick: int) -> Unit:
        return self.records[pick % len(self.records)]

    def take(self, buyer: int, answer: Answer, *, now: datetime) -> None:
        raise NotImplementedError

    # The waiting room.

    def ticket_of(self, buyer: int) -> str | None:
        ticket = self.tickets.get(buyer)
        return ticket and ticket.value

    def joined(self, buyer: int, answer: Answer, *, now: datetime) -> None:
        """A join: where the buyer stands. The room's first joiner is admitted at once, and
        everyone waiting once a second has passed since its first move (``ROOM``), unless the
        room reads no unit left (its reading may lag a second behind the stock)."""
        assert answer.status == 200 and answer.body["status"] in ("admitted", "waiting", "sold_out"), answer
        if answer.body["status"] != "admitted":
            return
        held = self.tickets.get(buyer)
        if held is not None and held.good(now):
            assert answer.body["ticket"] == held.value, (answer, held)  # joining again: the same ticket
        self.tickets[buyer] = Ticket(answer.body["ticket"], parse_datetime(answer.body["ticket_expires_at"]))

    def let_in(self, buyer: int, answer: Answer, *, now: datetime, told_busy: bool = False) -> None:
        """A take's answer, through the waiting room first where the item has one: 403
        ``not_admitted`` unless the buyer's ticket is good, which any answer spends but one
        asking to be sent again. ``told_busy``: a take refused ``busy`` where a paused lock
        holder's write was fenced out, nothing done."""
        if self.queued:
            ticket = self.tickets.get(buyer)
            refused = (answer.status, answer.code) == (403, "not_admitted")
            if ticket is None or not ticket.good(now):
                assert refused, (answer, ticket)
                return
            if (answer.status, answer.code) not in ASKS_AGAIN:
                ticket.spent = True
        if told_busy:
            assert (answer.status, answer.code) == (409, "busy"), answer
            return
        self.take(buyer, answer, now=now)

    def tickets_lost(self) -> None:
        """Redis lost the room, and with it the tickets it gave (``Ticket.lost``)."""
        for ticket in self.tickets.values():
            ticket.lost = True

    def took(self, buyer: int, answer: Answer, *, unit: int | None, held: str) -> None:
        """A take answered as written (``held``: the status a written one says) or pending."""
        if self.deferred:
            assert (answer.status, answer.code) == (202, "pending"), answer
            self.records.append(Unit(answer.body[self.id_field], buyer, "pending", unit=unit))
        else:
            assert (answer.status, answer.code) == (201, held), answer
            until = answer.body.get(self.deadline_field)
            self.records.append(Unit(answer.body[self.id_field], buyer, held, until and parse_datetime(until), unit))
        if unit is not None:
            self.left[unit] -= 1

    def refused(self, answer: Answer, refusals: set[str]) -> None:
        assert (answer.status, answer.code) in {(409, code) for code in refusals}, (answer, refusals)

    def kept(self, answer: Answer) -> bool:
        """Whether a key keeps ``answer`` for a retry to be given again."""
        return (answer.status, answer.code) not in NOT_KEPT

    def sent_again(self, first: Answer, again: Answer) -> None:
        assert again == first, (first, again)

    def over_abandons(self, buyer: int) -> bool:
        return bool(self.abandon_limit) and self.abandons.get(buyer, 0) >= self.abandon_limit

    # Time and the worker.

    def expired(self, released: int | None, *, now: datetime) -> None:
        due = [record for record in self.records if record.due(now)]
        if released is not None:
            assert released == len(due), (released, due)
        for record in due:
            self.released(record, self.lapsed)

    def drained(self, written: Written) -> None:
        for record in self.records:
            if record.status == "pending":
                assert record.record_id in written, (record, written)
                record.status, record.hold_until, unit = written[record.record_id]
                assert unit == record.unit, (record, unit)

    def undone(self) -> list[Unit]:
        """The drain gave up on every reservation waiting: each failed, its unit back (not an
        abandoned hold: the buyer did nothing)."""
        undone = [record for record in self.records if record.status == "pending"]
        for record in undone:
            record.status = "failed"
            if record.unit is not None:
                self.left[record.unit] += 1
        return undone

    def persisted(self, written: Written) -> None:
        """What a change of the item wrote of the reservations, if anything."""
        for record in self.records:
            if record.status == "pending" and record.record_id in written:
                record.status, record.hold_until, _ = written[record.record_id]

    def redis_lost(self) -> None:
        """Reservations not written yet are gone with their unit (a lost take is answered 404
        since: docs/strategies.md), and the marks of those undone with them; the state is
        rebuilt from the database."""
        for record in [record for record in self.records if record.status in ("pending", "failed")]:
            self.records.remove(record)
            if record.unit is not None and record.status == "pending":
                self.left[record.unit] += 1
        if self.deferred:
            self.state_lost = True

    def restocked(self, unit: int, units: int) -> None:
        self.left[unit] += units
        self.supplied[unit] += units

    # The comparison.

    def records_agree(self, written: Written) -> None:
        expected = {
            record.record_id: (record.status, record.hold_until, record.unit)
            for record in self.records
            if record.status not in ("pending", "failed")  # neither is ever a row
        }
        pending = {record.record_id for record in self.records if record.status == "pending"}
        assert {key: value for key, value in written.items() if key not in pending} == expected, (written, expected)

    def released(self, record: Unit, status: str) -> None:
        record.status = status
        if record.unit is not None:
            self.left[record.unit] += 1
        self.abandons[record.buyer] = self.abandons.get(record.buyer, 0) + 1

    # What each product names: the answer's id and deadline, the status a hold lapses to.
    id_field: ClassVar[str]
    deadline_field: ClassVar[str]
    lapsed: ClassVar[str]


@dataclass
class Sale(Ledger):
    """A voucher's: one per buyer, paid through the provider, or cancelled."""

    id_field = "order_id"
    deadline_field = "pay_by"
    lapsed = "expired"
    # Each charge by its reference: the order and what the model knows of it (requested,
    # paid, refunded).
    payments: dict[str, tuple[Unit, str]] = field(default_factory=dict)

    def take(self, buyer: int, answer: Answer, *, now: datetime) -> None:
        if self.deferred and self.state_lost:
            assert (answer.status, answer.code) == (503, "unavailable"), answer
            return
        refusals = set()
        if any(order.buyer == buyer and order.status in ("pending", "held", "paid") for order in self.records):
            refusals.add("already_purchased")
        if self.over_abandons(buyer):
            refusals.add("abandon_limit")
        if self.left[ONE] == 0:
            refusals.add("sold_out")
        if refusals:
            self.refused(answer, refusals)
        else:
            self.took(buyer, answer, unit=ONE, held="held")

    def payment_at(self, pick: int) -> tuple[str, Unit]:
        reference = sorted(self.payments)[pick % len(self.payments)]
        return reference, self.payments[reference][0]

    def pay(self, order: Unit, answer: Answer, *, now: datetime, confirmed_at_once: bool) -> None:
        if order.status != "held":
            assert (answer.status, answer.code) == (409, self._refusal(order)), (answer, order)
            return
        if order.due(now):
            assert (answer.status, answer.code) == (409, "expired"), (answer, order)
            self.released(order, "expired")
            return
        if confirmed_at_once:
            assert (answer.status, answer.body.get("payment")) == (200, "paid"), (answer, order)
            order.status = "paid"
        else:
            assert (answer.status, answer.body.get("payment")) == (202, "pending"), (answer, order)

    def charged(self, order: Unit, charges: dict[str, str]) -> None:
        """The order's charges as the provider's ledger has them after a pay: a new one is
        requested, or already paid when the provider confirmed it at once."""
        for reference, status in charges.items():
            if reference not in self.payments or status == "paid":
                self.payments[reference] = (order, status)

    def cancel(self, order: Unit, answer: Answer, *, now: datetime) -> None:
        if order.status != "held":
            assert (answer.status, answer.code) == (409, self._refusal(order)), (answer, order)
            return
        if order.due(now) and (answer.status, answer.code) == (409, "expired"):
            self.released(order, "expired")
            return
        assert (answer.status, answer.code) == (200, "cancelled"), (answer, order)
        self.released(order, "cancelled")

    def confirmed(self, reference: str, order: Unit, status: str, *, now: datetime) -> None:
        known = self.payments[reference][1]
        if known != "requested":
            assert status == known, (reference, status, known)
            return
        if order.status == "held" and not order.due(now):
            assert status == "paid", (reference, status, order)
            order.status = "paid"
        else:
            assert status == "refunded", (reference, status, order)
            if order.due(now):
                self.released(order, "expired")
        self.payments[reference] = (order, status)

    @staticmethod
    def _refusal(order: Unit) -> str:
        return {
            "pending": "pending",
            "paid": "already_paid",
            "cancelled": "cancelled",
            "expired": "expired",
            "failed": "cancelled",
        }[order.status]
