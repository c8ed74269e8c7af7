"""What the state machines of both products share (``voucher_machine``, ``pool_machine``): the
injected clock, the buyers, and the rules that are the same whoever sells: a take and its
retry, time, the deadline task and the beat's sweep, redis_lua's drain and reconcile, the
drain that finds the database out of reach, a lock holder paused past its lease, Redis
restarted empty, a switch of strategy, a rebucket, and the waiting room's tickets. Each
product's machine adds its own rules (pay, cancel, claim, restock) and says how its item is
made, read and changed.

The clock is injected (``Clock``): every ``timezone.now()`` in this process reads it, and so
does the waiting room, so a hold or a ticket lapses when the machine moves time past it, not
after a sleep. ``redis_lua`` checks the sale window against Redis' own clock, which the
window (a week) never reaches.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from unittest import mock
from uuid import uuid4

from django.contrib.auth import get_user_model
from django.db import OperationalError, connections
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
from inventory.redis_lua.records_insert import RecordsInsert
from inventory.strategies import STRATEGIES
from inventory.strategies import redis_lock as lock_strategy
from inventory.tasks import holds_sweep
from tests.model.reference import Answer, Ledger, Written

HOLD_SECONDS = 60
BUYERS = 3
ABANDON_LIMIT = 2
# The sale window: a week from a minute ago, which no run's clock leaves.
WINDOW = timedelta(days=7)
# A waiting room that admits its first joiner at once and everyone waiting at their next join
# once a second has passed since its first move (a second's credit of 1,000: a room banks one
# admission at its first move), with tickets good for half a hold.
ROOM = {"admission": "queue", "admission_rate": 1000, "admission_ticket_seconds": HOLD_SECONDS // 2}
# The strategies whose take holds a group lock at the fault point ``group-lock-held``.
FENCED = ("redis_lock", "redlock")
# The database's "server has gone away": what the worker's driver raises once it is out of reach.
GONE_AWAY = OperationalError(2006, "MySQL server has gone away")

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
    """What ``timezone.now()`` and the waiting room's moment answer while a machine runs: moved
    by its rules only, in whole seconds, so that the room's milliseconds are exact."""

    def __init__(self) -> None:
        self.real = timezone.now
        self.reset()

    def reset(self) -> None:
        """Back to the real time: each run starts there (Redis' clock is never moved)."""
        self.now = self.real().replace(microsecond=0)

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
    # The item's part of the API's paths, and its take's: /api/<items>/<id>/<take>; and its
    # records': /api/<records>/<id>.
    items_path: str
    take_path: str
    records_path: str
    strategy: str = "db_atomic"
    switches: tuple[str, ...] = ()
    clock: Clock
    ledger: Ledger

    # What each product says.

    def item_create(self, begin: datetime, **fields) -> Any:
        raise NotImplementedError

    def ledger_create(self) -> Ledger:
        raise NotImplementedError

    def item_read(self) -> Any:
        raise NotImplementedError

    def item_change(self, **changes) -> None:
        raise NotImplementedError

    def persist(self, **options) -> None:
        """Write what redis_lua reserved, as the drain does (``options``: the persisting's)."""
        raise NotImplementedError

    def written(self) -> Written:
        raise NotImplementedError

    def audit_check(self) -> None:
        raise NotImplementedError

    # The run.

    @initialize(queued=st.booleans())
    def an_item_on_sale(self, queued: bool) -> None:
        RULES_RUN["(runs)"] += 1
        RULES_RUN["(queued)"] += queued
        self.clock.reset()
        self.item = self.item_create(timezone.now() - timedelta(minutes=1), **(ROOM if queued else {}))
        users = [get_user_model().objects.create_user(f"model-{uuid4().hex[:12]}") for _ in range(BUYERS)]
        self.clients = [Client(headers={"Authorization": f"Bearer {token_issue(user=user)}"}) for user in users]
        self.ledger = self.ledger_create()
        self.ledger.queued = queued
        self.keys: list[tuple[str, int, str, Answer | None]] = []

    @property
    def deferred(self) -> bool:
        return STRATEGIES[self.item_read().strategy].deferred

    # The buyers.

    @rule(buyer=st.integers(0, BUYERS - 1), keyed=st.booleans())
    @counted
    def take(self, buyer: int, keyed: bool) -> None:
        key = uuid4().hex if keyed else None
        self._state_seen()
        answer = self._take(buyer, key)
        if key:
            self.keys.append((key, buyer, self.take_url, answer))

    @precondition(lambda self: self.keys)
    @rule(pick=st.integers(0, 50))
    @counted
    def send_again(self, pick: int) -> None:
        at = pick % len(self.keys)
        key, buyer, path, first = self.keys[at]
        self._state_seen()
        again = self.post(buyer, path, key, ticket=self.ledger.ticket_of(buyer))
        if first is None or not self.ledger.kept(first):  # forgotten, or never kept: run afresh
            self.ledger.let_in(buyer, again, now=self.clock.now)
            self.keys[at] = (key, buyer, path, again)
        else:
            self.ledger.sent_again(first, again)

    @precondition(lambda self: self.ledger.queued)
    @rule(buyer=st.integers(0, BUYERS - 1))
    @counted
    def queue_join(self, buyer: int) -> None:
        """Join the item's waiting room, or ask again where one stands in it."""
        answer = self.post(buyer, f"/api/{self.items_path}/{self.item.pk}/queue", None)
        self.ledger.joined(buyer, answer, now=self.clock.now)

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
    @rule()
    @counted
    def worker_finds_the_database_out_of_reach(self) -> None:
        """The drain while the database has been out of reach for longer than the worker
        waits for it: every reservation waiting is undone, its unit back, and its take
        answers ``failed`` with the reason from then on."""
        for _ in range(4):  # a call stops at the first of the item's states that had any waiting
            try:
                with mock.patch.object(RecordsInsert, "prepare", side_effect=GONE_AWAY):
                    self.persist(give_up_seconds=-1)  # every reservation waiting counts as too old
                break
            except OperationalError:
                continue
        for record in self.ledger.undone():
            answer = answered(self.clients[record.buyer].get(f"/api/{self.records_path}/{record.record_id}"))
            assert answer.status == 200 and answer.body["status"] == "failed", (record, answer)
            assert "unreachable" in answer.body["reason"], answer

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
        self.ledger.tickets_lost()
        self.keys = [(key, buyer, path, None) for key, buyer, path, _ in self.keys]

    # A lock holder paused past its lease: the fault point the code names.

    @precondition(lambda self: self.item_read().strategy in FENCED)
    @rule(buyer=st.integers(0, BUYERS - 1))
    @counted
    def holder_paused_past_its_lease(self, buyer: int) -> None:
        """A take stopped at ``group-lock-held`` (``core.faultpoints``, where the fault runner
        stops a server process) until its group lock's lease ran out, while the next buyer's
        take came through; then resumed. Its write must be refused (``busy``, nothing done)
        when the other wrote under a newer fence, and may go on when nothing overtook it."""
        other = (buyer + 1) % BUYERS
        overtaker: list[Answer] = []

        def overtake() -> None:
            try:
                overtaker.append(self.post(other, self.take_url, None, ticket=self.ledger.ticket_of(other)))
            finally:
                connections.close_all()

        armed = [True]

        def pause_here(name: str) -> None:
            if name != "group-lock-held" or not armed:
                return
            armed.clear()
            lock = sys._getframe(1).f_locals["held"].group_lock  # the caller's: the lock it holds
            for client in getattr(lock, "clients", None) or [lock.client]:
                client.delete(lock.key)  # the lease ran out
            beside = threading.Thread(target=overtake)
            beside.start()
            beside.join(60)
            assert not beside.is_alive(), "the take beside a paused holder did not finish"

        self._state_seen()
        with mock.patch.object(lock_strategy, "fault_point", pause_here):
            answer = self.post(buyer, self.take_url, None, ticket=self.ledger.ticket_of(buyer))
        if overtaker:
            self.ledger.let_in(other, overtaker[0], now=self.clock.now)
            if (answer.status, answer.code) == (409, "busy"):
                self.ledger.let_in(buyer, answer, now=self.clock.now, told_busy=True)
                return
        self.ledger.let_in(buyer, answer, now=self.clock.now)

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

    @property
    def take_url(self) -> str:
        return f"/api/{self.items_path}/{self.item.pk}/{self.take_path}"

    def _take(self, buyer: int, key: str | None) -> Answer:
        """A take by ``buyer``, with the ticket the room gave them if it gave one (used or
        lapsed alike: the model knows which the room must refuse)."""
        answer = self.post(buyer, self.take_url, key, ticket=self.ledger.ticket_of(buyer))
        self.ledger.let_in(buyer, answer, now=self.clock.now)
        return answer

    def post(self, buyer: int, path: str, key: str | None, *, ticket: str | None = None) -> Answer:
        headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
        if ticket:
            headers["HTTP_ADMISSION_TICKET"] = ticket
        return answered(self.clients[buyer].post(path, **headers))
