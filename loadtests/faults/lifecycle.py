"""A fault run whose items hold their takes (``--hold-seconds``): the wait until every hold
has been released or settled and every payment decided, the audit read then (``judge.
Lifecycle``), and the reads the lifecycle's faults judge themselves by.

Imported once Django is set up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import QuerySet

from inventory.records import Record
from lottery.selectors import pool_audit
from orders.selectors import voucher_audit
from payments.models import Payment
from payments.selectors import payments_audit

from ..products import PRODUCTS, Target
from ..verdict import VOUCHER
from .judge import Lifecycle


def records(product: str, target: Target) -> QuerySet:
    return PRODUCTS[product].records(target)


def held(product: str, target: Target) -> QuerySet:
    return records(product, target).filter(status=Record.Status.HELD)


def outstanding(product: str, target: Target) -> int:
    """Records held or not written yet, reservations waiting in Redis and payments waiting
    for their confirmation: 0 once the run has drained."""
    left = records(product, target).filter(status__in=(Record.Status.HELD, Record.Status.PENDING)).count()
    left += PRODUCTS[product].waiting(target)
    if product == VOUCHER:
        left += Payment.objects.filter(order__voucher_id=target.pk, status=Payment.Status.REQUESTED).count()
    return left


def drained(
    product: str, target: Target, *, hold_seconds: int, strategy: str, timeout: float, repair: bool = False
) -> Lifecycle:
    """Wait until nothing is outstanding (``timeout`` at most), then audit; with ``repair``
    (a fault that may kill a release between its commit and its return), a ``redis_lua``
    item's missed returns are first put back by reconciliation (``returns_repaired``)."""
    started = time.monotonic()
    drain_s = None
    try:
        while True:
            if outstanding(product, target) == 0:
                drain_s = time.monotonic() - started
                break
            if time.monotonic() - started >= timeout:
                break
            time.sleep(0.2)
        repaired = returns_repaired(product, target) if repair and strategy == "redis_lua" else 0
        return audited(
            product, target, hold_seconds=hold_seconds, strategy=strategy, drain_s=drain_s, repaired=repaired
        )
    finally:
        connection.close()


def audited(
    product: str, target: Target, *, hold_seconds: int, strategy: str, drain_s: float | None, repaired: int = 0
) -> Lifecycle:
    if product == VOUCHER:
        audit = voucher_audit(voucher_id=target.pk)
        payments = payments_audit(voucher_id=target.pk).as_dict()
    else:
        audit = pool_audit(pool_id=target.pk)
        payments = None
    holds = audit.holds
    return Lifecycle(
        hold_seconds=hold_seconds,
        drain_s=drain_s,
        supplied=audit.supplied,
        available=audit.stock,
        held=holds.held,
        # A pool's settled draws include those of no prize, which took no unit: its prizes
        # awarded count those held or claimed.
        settled=holds.settled if product == VOUCHER else audit.awarded - holds.held,
        released=holds.released,
        returned_twice=holds.returned_twice,
        settled_and_released=holds.settled_and_released,
        conserved=audit.conserved,
        payments=payments,
        returns_repaired=repaired,
        **(redis_figures(product, target) if strategy == "redis_lua" else {}),
    )


def redis_figures(product: str, target: Target) -> dict:
    check = PRODUCTS[product].reservations_check(target)
    drift = {"stock": len(check.stock), "takers": len(check.takers), "seqs_missing": check.seqs_missing}
    return {"redis_state": check.state, "redis_drift": drift}


def returns_missed(product: str, target: Target) -> int | None:
    """Units the database has back in stock and Redis does not (a release that committed and
    never returned its units), or None when Redis differs in any other way: only a missed
    return is reconciliation's to repair here."""
    check = PRODUCTS[product].reservations_check(target)
    if not check.state or check.seqs_missing:
        return None
    if any(redis >= expected for redis, expected in check.stock.values()):
        return None
    if any(redis <= expected for redis, expected in check.takers.values()):
        return None
    return sum(expected - redis for redis, expected in check.stock.values())


def returns_repaired(product: str, target: Target) -> int:
    """Reconcile the item as the beat does every ``RESERVATIONS_RECONCILE_SECONDS`` (which the
    runner turns off, so that drift shows): the units a missed return left out of Redis, put
    back; 0 when nothing was missed or Redis differed otherwise."""
    from inventory.product import product_of
    from inventory.redis_lua.client import reservations_client
    from inventory.redis_lua.item_states import item_reservations_reconcile

    missed = returns_missed(product, target)
    if not missed:
        return 0
    kind = product_of(product)
    item = kind.items().get(pk=target.pk)
    item_reservations_reconcile(kind, item=item, reservations=reservations_client())
    return missed


@dataclass(frozen=True)
class Released:
    """What became of some records once drained: how many are still held, how many were
    released, and the seconds from their deadline to their release (min, max)."""

    count: int
    held: int
    released: int
    late_min: float | None
    late_max: float | None

    def words(self) -> str:
        if self.late_max is None:
            return f"{self.released} of {self.count} released"
        return (
            f"{self.released} of {self.count} released {self.late_min:.1f} to {self.late_max:.1f} s "
            "after their deadline"
        )


def released(product: str, target: Target, ids: list[int]) -> Released:
    rows = records(product, target).filter(pk__in=ids).values_list("status", "hold_until", "released_at")
    late = [(gone - until).total_seconds() for status, until, gone in rows if gone is not None]
    return Released(
        count=len(ids),
        held=sum(1 for status, _, _ in rows if status == Record.Status.HELD),
        released=len(late),
        late_min=min(late, default=None),
        late_max=max(late, default=None),
    )


def held_ids(
    product: str, target: Target, *, due_by: datetime | None = None, ahead: datetime | None = None
) -> list[int]:
    """The ids of the target's held records due by ``due_by``, or still ahead of ``ahead``."""
    query = held(product, target)
    if due_by is not None:
        query = query.filter(hold_until__lte=due_by)
    if ahead is not None:
        query = query.filter(hold_until__gt=ahead)
    return list(query.values_list("pk", flat=True))


def bought_between(product: str, target: Target, start: datetime, end: datetime) -> int:
    """Records that took a unit between two moments (a returned unit bought again)."""
    taken = records(product, target).filter(created_at__gt=start, created_at__lte=end)
    if product != VOUCHER:
        taken = taken.filter(prize__isnull=False)  # a draw of no prize took no unit
    return taken.exclude(status__in=(Record.Status.PENDING, Record.Status.FAILED)).count()
