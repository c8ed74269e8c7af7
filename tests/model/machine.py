"""What the state machines of both products share (``voucher_machine``, ``pool_machine``): the
injected clock, the buyers, and the rules that are the same whoever sells: a take and its
retry, time, the deadline task and the beat's sweep, redis_lua's drain and reconcile, Redis
restarted empty, a switch of strategy and a rebucket. Each product's machine adds its own
rules (pay, cancel, claim, restock) and says how its item is made, read and changed.

The clock is injected (``Clock``): every ``timezone.now()`` in this process reads it, so a
hold lapses when the machine moves time past it, not after a sleep. ``redis_lua`` checks
the sale window against Redis' own clock, which the window (a week) never reaches.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import uuid4

from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from accounts.services import token_issue
from core.namespace import instance_key
from inventory.holds import holds_expire_due
from inventory.product import Product
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_check, item_reservations_reconcile
from inventory.strategies import STRATEGIES
from inventory.tasks import holds_sweep
from tests.model.reference import Answer, Ledger, Written

HOLD_SECONDS = 60
BUYERS = 3
ABANDON_LIMIT = 2
# The sale window: a week from a minute ago, which no run's clock leaves.
WINDOW = timedelta(days=7)

# How often each rule ran in this process, and how many runs began: what ``make explore``
# reports as covered (``tests/model/test_machines.py`` writes it out).
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


class ItemMachine(RuleBasedStateMachine):
    """Subclassed per product, then per strategy (``tests/model/test_machines.py``):
    ``strategy`` and ``switches`` (the guarded strategies a run may switch the item to while
    units are held)."""

    product: Product
    # The item's part of the API's paths, and its take's: /api/<items>/<id>/<take>.
    items_path: str
    take_path: str
    strategy: str = "db_atomic"
    switches: tuple[str, ...] = ()
    clock: Clock
    ledger: Ledger

    # What each product says.

    def item_create(self, begin: datetime) -> Any:
        raise NotImplementedError

    def ledger_create(self) -> Ledger:
        raise NotImplementedError

    def item_read(self) -> Any:
        raise NotImplementedError

    def item_change(self, **changes) -> None:
        raise NotImplementedError

    def persist(self) -> None:
        raise NotImplementedError

    def written(self) -> Written:
        raise NotImplementedError

    def audit_check(self) -> None:
        raise NotImplementedError

    # The run.

    @initialize()
    def an_item_on_sale(self) -> None:
        RULES_RUN["(runs)"] += 1
        self.clock.reset()
        self.item = self.item_create(timezone.now() - timedelta(minutes=1))
        users = [get_user_model().objects.create_user(f"model-{uuid4().hex[:12]}") for _ in range(BUYERS)]
        self.clients = [Client(headers={"Authorization": f"Bearer {token_issue(user=user)}"}) for user in users]
        self.ledger = self.ledger_create()
        self.keys: list[tuple[str, int, str, Answer | None]] = []

    @property
    def deferred(self) -> bool:
        return STRATEGIES[self.item_read().strategy].deferred

    # The buyers.

    @rule(buyer=st.integers(0, BUYERS - 1), keyed=st.booleans())
    @counted
    def take(self, buyer: int, keyed: bool) -> None:
        key = uuid4().hex if keyed else None
        path = f"/api/{self.items_path}/{self.item.pk}/{self.take_path}"
        self._state_seen()
        answer = self.post(buyer, path, key)
        self.ledger.take(buyer, answer, now=self.clock.now)
        if key:
            self.keys.append((key, buyer, path, answer))

    @precondition(lambda self: self.keys)
    @rule(pick=st.integers(0, 50))
    @counted
    def send_again(self, pick: int) -> None:
        at = pick % len(self.keys)
        key, buyer, path, first = self.keys[at]
        self._state_seen()
        again = self.post(buyer, path, key)
        if first is None or not self.ledger.kept(first):  # forgotten, or never kept: run afresh
            self.ledger.take(buyer, again, now=self.clock.now)
            self.keys[at] = (key, buyer, path, again)
        else:
            self.ledger.sent_again(first, again)

    # Time and the worker.

    @rule(seconds=st.sampled_from([1, 30, HOLD_SECONDS - 1, HOLD_SECONDS, HOLD_SECONDS + 1, 3 * HOLD_SECONDS]))
    @counted
    def time_passes(self, seconds: int) -> None:
        self.clock.now += timedelta(seconds=seconds)

    @rule(twice=st.booleans())
    @counted
    def deadline_task(self, twice: bool) -> None:
        for _ in range(2 if twice else 1):
            released = holds_expire_due(self.product, item_id=self.item.pk)
            self.ledger.expired(released, now=self.clock.now)

    @rule()
    @counted
    def beat_sweep(self) -> None:
        holds_sweep(self.product.kind)
        self.ledger.expired(None, now=self.clock.now)

    @precondition(lambda self: self.deferred)
    @rule()
    @counted
    def worker_drains(self) -> None:
        self.persist()
        self.ledger.drained(self.written())

    @precondition(lambda self: self.deferred)
    @rule(repair=st.booleans())
    @counted
    def reconcile(self, repair: bool) -> None:
        check = item_reservations_reconcile if repair else item_reservations_check
        check(self.product, item=self.item_read(), reservations=reservations_client())

    @rule()
    @counted
    def redis_restarts_empty(self) -> None:
        """Redis keeps nothing on disk: every key of this instance is gone (reservations,
        their streams, locks, fence counters, idempotency keys)."""
        client = reservations_client().client
        for key in client.scan_iter(match=instance_key("*"), count=1000):
            client.delete(key)
        self.ledger.redis_lost()
        self.keys = [(key, buyer, path, None) for key, buyer, path, _ in self.keys]

    # Staff.

    @precondition(lambda self: self.switches)
    @rule(data=st.data())
    @counted
    def strategy_switch(self, data) -> None:
        to = data.draw(st.sampled_from(self.switches))
        was_deferred = self.deferred
        self.item_change(strategy=to)
        if was_deferred and not self.deferred:
            # Leaving redis_lua writes what it reserved first (inventory.redis_lua.item_states).
            self.ledger.drained(self.written())
        self.ledger.deferred = self.deferred

    @rule(buckets=st.integers(1, 3))
    @counted
    def rebucket(self, buckets: int) -> None:
        self.item_change(buckets=buckets)
        # Spreading redis_lua's units again writes what it reserved first.
        self.ledger.persisted(self.written())

    # What must hold after every step.

    @invariant()
    def the_records_are_the_model(self) -> None:
        if hasattr(self, "item"):
            self.ledger.records_agree(self.written())

    @invariant()
    def the_audit_holds(self) -> None:
        if hasattr(self, "item"):
            self.audit_check()

    def _state_seen(self) -> None:
        """Whether redis_lua's state is back after a restart: a reconcile, a restock, a rebucket
        or a switch rebuilds it from the database, each in its own way; what must hold is that
        a take while it is missing sells nothing (503), and one after sells what is left."""
        if self.ledger.state_lost:
            self.ledger.state_lost = reservations_client().stock(group_id=self.item.group_id) is None

    def post(self, buyer: int, path: str, key: str | None) -> Answer:
        headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
        return answered(self.clients[buyer].post(path, **headers))
