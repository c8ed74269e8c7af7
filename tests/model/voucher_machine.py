"""A voucher's whole life as a Hypothesis state machine over the real services
(``tests.model.machine``): beside the rules both products share, a buyer's pay and cancel and
the payment provider's confirmations, late, again or never, and a restock; its model is
``tests.model.reference.Sale``.
"""

from __future__ import annotations

from datetime import datetime
from uuid import uuid4

from django.conf import settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from inventory.records import public_of
from orders.models import Order, Voucher
from orders.product import VOUCHER
from orders.selectors import voucher_audit, voucher_get
from orders.services import voucher_create, voucher_update
from payments.models import Payment
from payments.services import payment_confirm
from tests.model.machine import ABANDON_LIMIT, HOLD_SECONDS, WINDOW, ItemMachine, counted, to_ms
from tests.model.reference import ONE, Sale, Written
from tests.records import answered_rows
from tests.test_redis_lua import persist_voucher

# Three buyers and two units: enough to sell out, buy again after a release and hit the cap
# on abandoned holds, small enough that short runs reach each.
STOCK = 2


class VoucherMachine(ItemMachine):
    product = VOUCHER
    items_path, take_path, records_path = "vouchers", "purchase", "orders"
    ledger: Sale

    def item_create(self, begin: datetime, **fields) -> Voucher:
        return voucher_create(
            title=f"Model {uuid4().hex[:8]}", stock=STOCK, begin_at=begin, end_at=begin + WINDOW,
            strategy=self.strategy, hold_seconds=HOLD_SECONDS, abandon_limit=ABANDON_LIMIT,
            abandon_cooldown_seconds=0, **fields,
        )  # fmt: skip

    def ledger_create(self) -> Sale:
        return Sale(stock={ONE: STOCK}, abandon_limit=ABANDON_LIMIT, deferred=self.deferred)

    def item_read(self) -> Voucher:
        return voucher_get(voucher_id=self.item.pk)

    def item_change(self, **changes) -> None:
        voucher_update(voucher=self.item_read(), **changes)

    def persist(self, **options) -> None:
        persist_voucher(self.item, **options)

    def written(self) -> Written:
        rows = Order.objects.filter(voucher_id=self.item.pk).values_list("pk", "reservation", "status", "hold_until")
        return {public_of(reservation or pk): (status, to_ms(until), ONE) for pk, reservation, status, until in rows}

    def audit_check(self) -> None:
        audit = voucher_audit(voucher_id=self.item.pk)
        assert audit.ok, audit
        assert audit.supplied == self.ledger.supplied[ONE]
        if not self.deferred:
            assert audit.stock == self.ledger.left[ONE], (audit.stock, self.ledger.left)

    # The buyer's pay and cancel.

    @precondition(lambda self: self.ledger.records)
    @rule(pick=st.integers(0, 50), provider_waits=st.booleans(), keyed=st.booleans())
    @counted
    def pay(self, pick: int, provider_waits: bool, keyed: bool) -> None:
        order = self.ledger.record_at(pick)
        settings.PAYMENT_PROVIDER_DELAY_MS = 60_000 if provider_waits else 0
        answer = self.post(order.buyer, f"/api/orders/{order.record_id}/pay", uuid4().hex if keyed else None)
        self.ledger.pay(order, answer, now=self.clock.now, confirmed_at_once=not provider_waits)
        self.ledger.charged(order, self._charges(order.record_id))

    @precondition(lambda self: self.ledger.records)
    @rule(pick=st.integers(0, 50), keyed=st.booleans())
    @counted
    def cancel(self, pick: int, keyed: bool) -> None:
        order = self.ledger.record_at(pick)
        answer = self.post(order.buyer, f"/api/orders/{order.record_id}/cancel", uuid4().hex if keyed else None)
        self.ledger.cancel(order, answer, now=self.clock.now)

    # The payment provider: a confirmation late, again, or never (no rule runs it).

    @precondition(lambda self: self.ledger.payments)
    @rule(pick=st.integers(0, 50))
    @counted
    def provider_confirms(self, pick: int) -> None:
        reference, order = self.ledger.payment_at(pick)
        payment = payment_confirm(reference=reference)
        self.ledger.confirmed(reference, order, payment.status, now=self.clock.now)

    # Staff.

    @rule(units=st.integers(1, 2))
    @counted
    def restock(self, units: int) -> None:
        self.item_change(restock=units)
        self.ledger.restocked(ONE, units)
        self.ledger.persisted(self.written())

    def _charges(self, order_id: int) -> dict[str, str]:
        """{reference: status} of the charges of the order the buyer knows as ``order_id``."""
        of_voucher = Payment.objects.filter(order__voucher_id=self.item.pk)
        named = of_voucher.filter(order__in=answered_rows(Order, order_id))
        return dict(named.values_list("reference", "status"))
