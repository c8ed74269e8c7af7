"""A prize pool's whole life as a Hypothesis state machine over the real services
(``tests.model.machine``): beside the rules both products share, a winner's claim and a
prize's restock; its model is ``tests.model.pool_reference.Draws``.

The pool has one prize and no weight for no prize, so that each draw's outcome is known
before it is drawn and a failing run shrinks and replays the same; the odds themselves are
tested by chi-square (``tests/lottery/test_odds.py``).
"""

from __future__ import annotations

from datetime import datetime
from uuid import uuid4

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from inventory.records import public_of
from lottery.models import Draw, Pool, Prize
from lottery.product import POOL
from lottery.selectors import pool_audit, pool_get
from lottery.services import pool_create, pool_update, prize_create, prize_update
from tests.model.machine import ABANDON_LIMIT, HOLD_SECONDS, WINDOW, ItemMachine, counted, to_ms
from tests.model.pool_reference import Draws
from tests.model.reference import Written
from tests.test_redis_lua import persist_pool

DRAWS_PER_USER = 2
PRIZE_STOCK = 2


class PoolMachine(ItemMachine):
    product = POOL
    items_path, take_path, records_path = "pools", "draw", "draws"
    ledger: Draws

    def item_create(self, begin: datetime, **fields) -> Pool:
        pool = pool_create(
            name=f"Model {uuid4().hex[:8]}", begin_at=begin, end_at=begin + WINDOW, strategy=self.strategy,
            draws_per_user=DRAWS_PER_USER, no_prize_weight=0, hold_seconds=HOLD_SECONDS,
            abandon_limit=ABANDON_LIMIT, abandon_cooldown_seconds=0, **fields,
        )  # fmt: skip
        self.prize = prize_create(pool=pool, name="Gold", stock=PRIZE_STOCK)
        return pool_get(pool_id=pool.pk)

    def ledger_create(self) -> Draws:
        return Draws(
            stock={self.prize.pk: PRIZE_STOCK}, abandon_limit=ABANDON_LIMIT, deferred=self.deferred,
            draws_per_user=DRAWS_PER_USER,
        )  # fmt: skip

    def item_read(self) -> Pool:
        return pool_get(pool_id=self.item.pk)

    def item_change(self, **changes) -> None:
        pool_update(pool=self.item_read(), **changes)

    def persist(self, **options) -> None:
        persist_pool(self.item, **options)

    def written(self) -> Written:
        rows = Draw.objects.filter(pool_id=self.item.pk).values_list(
            "pk", "reservation", "status", "hold_until", "prize_id"
        )
        return {
            public_of(reservation or pk): (status, to_ms(until), prize)
            for pk, reservation, status, until, prize in rows
        }

    def audit_check(self) -> None:
        audit = pool_audit(pool_id=self.item.pk)
        assert audit.ok, audit
        assert audit.supplied == sum(self.ledger.supplied.values())
        if not self.deferred:
            assert audit.stock == sum(self.ledger.left.values()), (audit.stock, self.ledger.left)

    # The winner's claim.

    @precondition(lambda self: self.ledger.records)
    @rule(pick=st.integers(0, 50), keyed=st.booleans())
    @counted
    def claim(self, pick: int, keyed: bool) -> None:
        draw = self.ledger.record_at(pick)
        answer = self.post(draw.buyer, f"/api/draws/{draw.record_id}/claim", uuid4().hex if keyed else None)
        self.ledger.claim(draw, answer, now=self.clock.now)

    # Staff.

    @rule(units=st.integers(1, 2))
    @counted
    def restock(self, units: int) -> None:
        prize_update(prize=Prize.objects.get(pk=self.prize.pk), restock=units)
        self.ledger.restocked(self.prize.pk, units)
        self.ledger.persisted(self.written())
