"""Reads of payments, and the audit of the payments' invariant: every provider confirmation
is exactly one paid order or one refund (docs/design.md, "Payments and refunds")."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, Exists, OuterRef, Q

from inventory.audits import Audit
from orders.models import Order

from .models import Payment, ProviderCharge


def payment_latest(*, order: Order) -> Payment | None:
    """The order's newest payment, or None."""
    return Payment.objects.filter(order_id=order.pk).order_by("-id").first()


@dataclass(frozen=True)
class PaymentsAudit(Audit):
    """What the provider confirmed and what became of it, for one voucher's orders or all.

    ``confirmations`` are the provider's charges; each is one payment, ``paid``,
    ``refunded`` or still ``waiting`` for its confirmation to arrive. Broken when an order
    was paid by two payments (``double_paid``), a payment is paid but its order is not
    (``paid_unsold``), an order is paid with no paid payment (``sold_unpaid``), or a refund
    and the provider's ledger disagree (``refunds_unrecorded``)."""

    voucher_id: int | None
    confirmations: int
    paid: int
    refunded: int
    waiting: int
    double_paid: int
    paid_unsold: int
    sold_unpaid: int
    refunds_unrecorded: int

    @property
    def used(self) -> bool:
        """Whether the orders were paid through the provider: only then does the payments'
        invariant judge them (``manage.py audit``, the voucher's admin page). An order settled
        by other means (a test, another app) is paid with no payment, which this audit counts
        as sold unpaid."""
        return self.confirmations > 0

    @property
    def off(self) -> int:
        """How far the payments are from the invariant: confirmations not accounted for by
        one payment each, and every payment or order broken as the class says; 0 when
        ``ok``. A payment still waiting is not off (a drained run's judge counts it too)."""
        accounted = self.paid + self.refunded + self.waiting
        broken = self.double_paid + self.paid_unsold + self.sold_unpaid + self.refunds_unrecorded
        return abs(self.confirmations - accounted) + broken

    @property
    def ok(self) -> bool:
        return self.off == 0


def payments_audit(*, voucher_id: int | None = None) -> PaymentsAudit:
    """The payments' invariant as the database holds it now, for the orders of ``voucher_id``
    (every order when None). Run once the callbacks have arrived, ``waiting`` is 0."""
    if voucher_id is not None:
        return payments_audits(voucher_ids=[voucher_id])[voucher_id]
    audits = payments_audits().values()
    return PaymentsAudit(voucher_id=None, **{name: sum(getattr(a, name) for a in audits) for name in _FIGURES})


_FIGURES = (
    "confirmations",
    "paid",
    "refunded",
    "waiting",
    "double_paid",
    "paid_unsold",
    "sold_unpaid",
    "refunds_unrecorded",
)


def payments_audits(*, voucher_ids: list[int] | None = None) -> dict[int, PaymentsAudit]:
    """``payments_audit`` of each voucher of ``voucher_ids`` (of every voucher with a payment
    or a paid order when None), in three queries whatever their number: the payments counted
    in one pass grouped by their order's voucher and outcome (``_payment_outcomes``); the
    orders paid twice; the orders paid with no paid payment. Every figure is a count of
    payments or orders, so the audit of all orders is the sum of the vouchers'."""
    if voucher_ids is not None and not voucher_ids:
        return {}
    payments, orders = Payment.objects.all(), Order.objects.all()
    if voucher_ids is not None:
        payments, orders = payments.filter(order__voucher_id__in=voucher_ids), orders.filter(voucher_id__in=voucher_ids)
    figures: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(_FIGURES, 0))
    counted = {Payment.Status.PAID: "paid", Payment.Status.REFUNDED: "refunded", Payment.Status.REQUESTED: "waiting"}
    for voucher_id, status, order_status, charged, charge_refunded, n in _payment_outcomes(voucher_ids):
        voucher = figures[voucher_id]
        voucher[counted[status]] += n
        if status == Payment.Status.PAID and order_status != Order.Status.PAID:
            voucher["paid_unsold"] += n
        if charged:
            voucher["confirmations"] += n
            # A refund the payment records and the ledger does not, or the other way round.
            if (status == Payment.Status.REFUNDED) != bool(charge_refunded):
                voucher["refunds_unrecorded"] += n
    paid = Q(status=Payment.Status.PAID)
    twice = payments.filter(paid).order_by().values("order_id").annotate(n=Count("id")).filter(n__gt=1)
    for voucher_id in twice.values_list("order__voucher_id", flat=True):
        figures[voucher_id]["double_paid"] += 1
    paid_payment = Payment.objects.filter(paid, order_id=OuterRef("pk"))
    unpaid = orders.filter(status=Order.Status.PAID).filter(~Exists(paid_payment)).order_by()
    for voucher_id, n in unpaid.values_list("voucher_id").annotate(n=Count("id")):
        figures[voucher_id]["sold_unpaid"] = n
    ids = figures.keys() if voucher_ids is None else voucher_ids
    return {voucher_id: PaymentsAudit(voucher_id=voucher_id, **figures[voucher_id]) for voucher_id in ids}


def _payment_outcomes(voucher_ids: list[int] | None) -> list[tuple]:
    """The payments of the orders of ``voucher_ids`` (every order when None), counted by
    (voucher, payment's status, order's status, whether the provider's ledger has its charge,
    whether the ledger refunded it): a row per combination, whatever the payments' number.

    SQL, for its outer join of the ledger by reference: the ledger is kept apart from the
    payments, with no relation the ORM could join, and its correlated subqueries (a lookup
    per payment per figure) took 3-4 times as long over 240,000 payments."""
    payment, order, charge = (model._meta.db_table for model in (Payment, Order, ProviderCharge))
    where = ""
    if voucher_ids is not None:
        where = f"WHERE o.voucher_id IN ({', '.join(['%s'] * len(voucher_ids))})"
    outcome = "o.voucher_id, p.status, o.status, c.id IS NOT NULL, c.refunded_at IS NOT NULL"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {outcome}, COUNT(*) FROM {payment} p JOIN {order} o ON o.id = p.order_id"
            f" LEFT JOIN {charge} c ON c.reference = p.reference {where} GROUP BY {outcome}",
            voucher_ids or [],
        )
        return cursor.fetchall()
