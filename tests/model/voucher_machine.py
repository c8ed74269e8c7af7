"""A voucher's whole life as a Hypothesis state machine, over the real services: MariaDB,
Redis, the HTTP API in this process and the tasks a worker runs, beside a reference model in
plain Python (``tests.model.reference``).

Each rule does one thing a buyer, staff, the payment provider or the worker does; after
each, the model's prediction of the answer and of every record is compared with what the
application answered and wrote, and the voucher's audit must hold. Hypothesis shrinks a
failing run to its smallest sequence of rules, printed as the story that broke it.

The clock is injected (``Clock``): every ``timezone.now()`` in this process reads it, so a
hold lapses when the machine moves time past it, not after a sleep. ``redis_lua`` checks
the sale window against Redis' own clock, which the window (a week) never reaches.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import uuid4

from django.conf import settings
from django.db.models import Q
from django.test import Client
from django.utils import timezone
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from accounts.services import token_issue
from core.namespace import instance_key
from inventory.holds import holds_expire_due
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_check, item_reservations_reconcile
from inventory.strategies import STRATEGIES
from inventory.tasks import holds_sweep
from orders.models import Order
from orders.product import VOUCHER
from orders.selectors import voucher_audit, voucher_get
from orders.services import voucher_create, voucher_update
from payments.models import Payment
from payments.services import payment_confirm
from tests.model.reference import Answer, Sale
from tests.test_redis_lua import persist_voucher

HOLD_SECONDS = 60
# Three buyers and two units: enough to sell out, buy again after a release and hit the
# cap on abandoned holds, small enough that short runs reach each.
BUYERS = 3
STOCK = 2
ABANDON_LIMIT = 2


# How often each rule ran in this process, and how many runs began: what ``make explore``
# reports as covered (``tests/model/test_voucher_machine.py`` writes it out).
RULES_RUN: Counter[str] = Counter()


def counted(rule_method: Callable) -> Callable:
    @functools.wraps(rule_method)
    def run(self, *args, **kwargs):
        RULES_RUN[rule_method.__name__] += 1
        return rule_method(self, *args, **kwargs)

    return run


class Clock:
    """What ``timezone.now()`` answers while a machine runs: moved by its rules only."""

    def __init__(self) -> None:
        self.real = timezone.now
        self.reset()

    def reset(self) -> None:
        """Back to the real time: each run starts there (Redis' clock is never moved)."""
        self.now = self.real()

    def __call__(self) -> datetime:
        return self.now


def to_ms(moment: datetime | None) -> datetime | None:
    """``moment`` as the API writes it: to the millisecond."""
    return moment and moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def answered(response) -> Answer:
    body = response.json() if response.content else {}
    return Answer(response.status_code, body.get("code") or body.get("status"), body)


class VoucherMachine(RuleBasedStateMachine):
    """Subclassed per strategy (``machine_for``): ``strategy`` and ``switches`` (the safe
    strategies a run may switch the voucher to while units are held)."""

    strategy: str = "db_atomic"
    switches: tuple[str, ...] = ()
    clock: Clock

    @initialize()
    def a_voucher_on_sale(self) -> None:
        RULES_RUN["(runs)"] += 1
        self.clock.reset()
        begin = timezone.now() - timedelta(minutes=1)
        self.voucher = voucher_create(
            title=f"Model {uuid4().hex[:8]}", stock=STOCK, begin_at=begin, end_at=begin + timedelta(days=7),
            strategy=self.strategy, hold_seconds=HOLD_SECONDS, abandon_limit=ABANDON_LIMIT,
            abandon_cooldown_seconds=0,
        )  # fmt: skip
        from django.contrib.auth import get_user_model

        users = [get_user_model().objects.create_user(f"model-{uuid4().hex[:12]}") for _ in range(BUYERS)]
        self.clients = [Client(headers={"Authorization": f"Bearer {token_issue(user=user)}"}) for user in users]
        self.sale = Sale(units=STOCK, abandon_limit=ABANDON_LIMIT, deferred=self.deferred)
        self.keys: list[tuple[str, int, str, Answer | None]] = []

    @property
    def deferred(self) -> bool:
        return STRATEGIES[self.current_strategy].deferred

    @property
    def current_strategy(self) -> str:
        return voucher_get(voucher_id=self.voucher.pk).strategy if hasattr(self, "voucher") else self.strategy

    # The buyers.

    @rule(buyer=st.integers(0, BUYERS - 1), keyed=st.booleans())
    @counted
    def take(self, buyer: int, keyed: bool) -> None:
        key = uuid4().hex if keyed else None
        path = f"/api/vouchers/{self.voucher.pk}/purchase"
        self._state_seen()
        answer = self._post(buyer, path, key)
        self.sale.take(buyer, answer, now=self.clock.now)
        if key:
            self.keys.append((key, buyer, path, answer))

    @precondition(lambda self: self.keys)
    @rule(pick=st.integers(0, 50))
    @counted
    def send_again(self, pick: int) -> None:
        at = pick % len(self.keys)
        key, buyer, path, first = self.keys[at]
        self._state_seen()
        again = self._post(buyer, path, key)
        if first is None or not self.sale.kept(first):  # forgotten, or never kept: run afresh
            self.sale.take(buyer, again, now=self.clock.now)
            self.keys[at] = (key, buyer, path, again)
        else:
            self.sale.sent_again(first, again)

    @precondition(lambda self: self.sale.orders)
    @rule(pick=st.integers(0, 50), provider_waits=st.booleans(), keyed=st.booleans())
    @counted
    def pay(self, pick: int, provider_waits: bool, keyed: bool) -> None:
        order = self.sale.order_at(pick)
        settings.PAYMENT_PROVIDER_DELAY_MS = 60_000 if provider_waits else 0
        answer = self._post(order.buyer, f"/api/orders/{order.order_id}/pay", uuid4().hex if keyed else None)
        self.sale.pay(order, answer, now=self.clock.now, confirmed_at_once=not provider_waits)
        self.sale.charged(order, self._charges(order.order_id))

    @precondition(lambda self: self.sale.orders)
    @rule(pick=st.integers(0, 50), keyed=st.booleans())
    @counted
    def cancel(self, pick: int, keyed: bool) -> None:
        order = self.sale.order_at(pick)
        answer = self._post(order.buyer, f"/api/orders/{order.order_id}/cancel", uuid4().hex if keyed else None)
        self.sale.cancel(order, answer, now=self.clock.now)

    # The payment provider: a confirmation late, again, or never (no rule runs it).

    @precondition(lambda self: self.sale.payments)
    @rule(pick=st.integers(0, 50))
    @counted
    def provider_confirms(self, pick: int) -> None:
        reference, order = self.sale.payment_at(pick)
        payment = payment_confirm(reference=reference)
        self.sale.confirmed(reference, order, payment.status, now=self.clock.now)

    # Time and the worker.

    @rule(seconds=st.sampled_from([1, 30, HOLD_SECONDS - 1, HOLD_SECONDS, HOLD_SECONDS + 1, 3 * HOLD_SECONDS]))
    @counted
    def time_passes(self, seconds: int) -> None:
        self.clock.now += timedelta(seconds=seconds)

    @rule(twice=st.booleans())
    @counted
    def deadline_task(self, twice: bool) -> None:
        for _ in range(2 if twice else 1):
            released = holds_expire_due(VOUCHER, item_id=self.voucher.pk)
            self.sale.expired(released, now=self.clock.now)

    @rule()
    @counted
    def beat_sweep(self) -> None:
        holds_sweep(VOUCHER.kind)
        self.sale.expired(None, now=self.clock.now)

    @precondition(lambda self: self.deferred)
    @rule()
    @counted
    def worker_drains(self) -> None:
        persist_voucher(self.voucher)
        self.sale.drained(self._written())

    @precondition(lambda self: self.deferred)
    @rule(repair=st.booleans())
    @counted
    def reconcile(self, repair: bool) -> None:
        voucher = voucher_get(voucher_id=self.voucher.pk)
        if repair:
            item_reservations_reconcile(VOUCHER, item=voucher, reservations=reservations_client())
        else:
            item_reservations_check(VOUCHER, item=voucher, reservations=reservations_client())

    @rule()
    @counted
    def redis_restarts_empty(self) -> None:
        """Redis keeps nothing on disk: every key of this instance is gone (reservations,
        their streams, locks, fence counters, idempotency keys)."""
        client = reservations_client().client
        for key in client.scan_iter(match=instance_key("*"), count=1000):
            client.delete(key)
        self.sale.redis_lost()
        self.keys = [(key, buyer, path, None) for key, buyer, path, _ in self.keys]

    # Staff.

    @rule(units=st.integers(1, 2))
    @counted
    def restock(self, units: int) -> None:
        voucher_update(voucher=voucher_get(voucher_id=self.voucher.pk), restock=units)
        self.sale.restocked(units)
        self.sale.persisted(self._written())

    @precondition(lambda self: self.switches)
    @rule(data=st.data())
    @counted
    def strategy_switch(self, data) -> None:
        to = data.draw(st.sampled_from(self.switches))
        was_deferred = self.deferred
        voucher_update(voucher=voucher_get(voucher_id=self.voucher.pk), strategy=to)
        if was_deferred and not self.deferred:
            # Leaving redis_lua writes what it reserved first (inventory.redis_lua.item_states).
            self.sale.drained(self._written())
        self.sale.deferred = self.deferred

    @rule(buckets=st.integers(1, 3))
    @counted
    def rebucket(self, buckets: int) -> None:
        voucher_update(voucher=voucher_get(voucher_id=self.voucher.pk), buckets=buckets)
        # Spreading redis_lua's units again writes what it reserved first.
        self.sale.persisted(self._written())

    # What must hold after every step.

    @invariant()
    def the_records_are_the_model(self) -> None:
        if hasattr(self, "voucher"):
            self.sale.records_agree(self._written())

    @invariant()
    def the_audit_holds(self) -> None:
        if not hasattr(self, "voucher"):
            return
        audit = voucher_audit(voucher_id=self.voucher.pk)
        assert audit.ok, audit
        assert audit.supplied == self.sale.supplied
        if not self.deferred:
            assert audit.stock == self.sale.left, (audit.stock, self.sale.left)

    def _state_seen(self) -> None:
        """Whether redis_lua's state is back after a restart: a reconcile, a restock, a rebucket
        or a switch rebuilds it from the database, each in its own way; what must hold is that
        a take while it is missing sells nothing (503), and one after sells what is left."""
        if self.sale.state_lost:
            self.sale.state_lost = reservations_client().stock(group_id=self.voucher.group_id) is None

    def _post(self, buyer: int, path: str, key: str | None) -> Answer:
        headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
        return answered(self.clients[buyer].post(path, **headers))

    def _written(self) -> dict[int, tuple[str, datetime | None]]:
        """{the id the buyer was answered: (status, hold_until)} of every order written."""
        rows = Order.objects.filter(voucher_id=self.voucher.pk).values_list("pk", "reservation", "status", "hold_until")
        return {reservation or pk: (status, to_ms(until)) for pk, reservation, status, until in rows}

    def _charges(self, order_id: int) -> dict[str, str]:
        """{reference: status} of the charges of the order the buyer knows as ``order_id``."""
        of_voucher = Payment.objects.filter(order__voucher_id=self.voucher.pk)
        named = of_voucher.filter(Q(order__reservation=order_id) | Q(order__reservation=None, order_id=order_id))
        return dict(named.values_list("reference", "status"))
