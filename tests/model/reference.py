"""The reference model of one voucher's sale, in plain Python: what each buyer holds, what
is paid, the units left and supplied, each hold's deadline. The state machines
(``tests.model.voucher_machine``) tell it each answer the application gave, and it asserts
the answer is one the rules allow, then moves as the application should have.

Where the rules leave a choice (a cancel sent after the deadline but before the expiry ran
is refused as expired or done, by when the strategy looks), the model accepts each allowed
answer and follows the one given; the records are compared after every step all the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

TAKING = ("pending", "held", "paid")
# Answers a key does not keep: a retry under it runs afresh (docs/api.md, "Idempotency keys").
NOT_KEPT = {(409, "busy"), (409, "pending"), (503, "unavailable"), (429, "rate_limited")}


@dataclass(frozen=True)
class Answer:
    status: int
    code: str | None
    body: dict[str, Any]


@dataclass
class Unit:
    """An order as the model knows it."""

    order_id: int
    buyer: int
    status: str
    hold_until: datetime | None = None

    def due(self, now: datetime) -> bool:
        return self.status == "held" and self.hold_until is not None and self.hold_until <= now


@dataclass
class Sale:
    units: int
    abandon_limit: int
    deferred: bool
    supplied: int = 0
    orders: list[Unit] = field(default_factory=list)
    abandons: dict[int, int] = field(default_factory=dict)
    # Each charge by its reference: the order and what the model knows of it (requested,
    # paid, refunded).
    payments: dict[str, tuple[Unit, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.left = self.units
        self.supplied = self.units
        # redis_lua's state went with a Redis restart, and nothing rebuilt it yet.
        self.state_lost = False

    # Lookups.

    def order_at(self, pick: int) -> Unit:
        return self.orders[pick % len(self.orders)]

    def payment_at(self, pick: int) -> tuple[str, Unit]:
        reference = sorted(self.payments)[pick % len(self.payments)]
        return reference, self.payments[reference][0]

    # The buyers.

    def take(self, buyer: int, answer: Answer, *, now: datetime) -> None:
        if self.deferred and self.state_lost:
            assert (answer.status, answer.code) == (503, "unavailable"), answer
            return
        refusals = set()
        if any(order.buyer == buyer and order.status in TAKING for order in self.orders):
            refusals.add("already_purchased")
        if self.abandon_limit and self.abandons.get(buyer, 0) >= self.abandon_limit:
            refusals.add("abandon_limit")
        if self.left == 0:
            refusals.add("sold_out")
        if refusals:
            assert (answer.status, answer.code) in {(409, code) for code in refusals}, (answer, refusals)
            return
        if self.deferred:
            assert (answer.status, answer.code) == (202, "pending"), answer
            self.orders.append(Unit(answer.body["order_id"], buyer, "pending"))
        else:
            assert (answer.status, answer.code) == (201, "held"), answer
            self.orders.append(Unit(answer.body["order_id"], buyer, "held", parse_datetime(answer.body["pay_by"])))
        self.left -= 1

    def kept(self, answer: Answer) -> bool:
        """Whether a key keeps ``answer`` for a retry to be given again."""
        return (answer.status, answer.code) not in NOT_KEPT

    def sent_again(self, first: Answer, again: Answer) -> None:
        assert again == first, (first, again)

    def pay(self, order: Unit, answer: Answer, *, now: datetime, confirmed_at_once: bool) -> None:
        if order.status != "held":
            assert (answer.status, answer.code) == (409, self._refusal(order)), (answer, order)
            return
        if order.due(now):
            assert (answer.status, answer.code) == (409, "expired"), (answer, order)
            self._released(order, "expired")
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
            if reference not in self.payments:
                self.payments[reference] = (order, status)
            elif status == "paid":
                self.payments[reference] = (order, status)

    def cancel(self, order: Unit, answer: Answer, *, now: datetime) -> None:
        if order.status != "held":
            assert (answer.status, answer.code) == (409, self._refusal(order)), (answer, order)
            return
        if order.due(now) and (answer.status, answer.code) == (409, "expired"):
            self._released(order, "expired")
            return
        assert (answer.status, answer.code) == (200, "cancelled"), (answer, order)
        self._released(order, "cancelled")

    # The payment provider.

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
                self._released(order, "expired")
        self.payments[reference] = (order, status)

    # Time and the worker.

    def expired(self, released: int | None, *, now: datetime) -> None:
        due = [order for order in self.orders if order.due(now)]
        if released is not None:
            assert released == len(due), (released, due)
        for order in due:
            self._released(order, "expired")

    def drained(self, written: dict[int, tuple[str, datetime | None]]) -> None:
        for order in self.orders:
            if order.status == "pending":
                assert order.order_id in written, (order, written)
                order.status, order.hold_until = written[order.order_id]

    def persisted(self, written: dict[int, tuple[str, datetime | None]]) -> None:
        """What a change of the item wrote of the reservations, if anything."""
        for order in self.orders:
            if order.status == "pending" and order.order_id in written:
                order.status, order.hold_until = written[order.order_id]

    def redis_lost(self) -> None:
        """Reservations not written yet are gone with their unit (a lost take is answered 404
        since: docs/strategies.md); the state is rebuilt from the database."""
        lost = [order for order in self.orders if order.status == "pending"]
        for order in lost:
            self.orders.remove(order)
            self.left += 1
        if self.deferred:
            self.state_lost = True

    # Staff.

    def restocked(self, units: int) -> None:
        self.left += units
        self.supplied += units

    # The comparison.

    def records_agree(self, written: dict[int, tuple[str, datetime | None]]) -> None:
        expected = {
            order.order_id: (order.status, order.hold_until) for order in self.orders if order.status != "pending"
        }
        pending = {order.order_id for order in self.orders if order.status == "pending"}
        assert {key: value for key, value in written.items() if key not in pending} == expected, (written, expected)

    def _released(self, order: Unit, status: str) -> None:
        order.status = status
        self.left += 1
        self.abandons[order.buyer] = self.abandons.get(order.buyer, 0) + 1

    @staticmethod
    def _refusal(order: Unit) -> str:
        return {"pending": "pending", "paid": "already_paid", "cancelled": "cancelled", "expired": "expired"}[
            order.status
        ]
