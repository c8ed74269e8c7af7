"""Reads of payments, and the audit of the payments' invariant: every provider confirmation
is exactly one paid order or one refund (docs/design.md, "Payments and refunds")."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q

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
    payments = Payment.objects.all()
    orders = Order.objects.all()
    if voucher_id is not None:
        payments = payments.filter(order__voucher_id=voucher_id)
        orders = orders.filter(voucher_id=voucher_id)
    counts = payments.aggregate(
        paid=Count("id", filter=Q(status=Payment.Status.PAID)),
        refunded=Count("id", filter=Q(status=Payment.Status.REFUNDED)),
        waiting=Count("id", filter=Q(status=Payment.Status.REQUESTED)),
    )
    charges = ProviderCharge.objects.filter(reference__in=payments.values("reference"))
    paid = payments.filter(status=Payment.Status.PAID)
    refunded = payments.filter(status=Payment.Status.REFUNDED).values("reference")
    return PaymentsAudit(
        voucher_id=voucher_id,
        confirmations=charges.count(),
        **counts,
        double_paid=paid.values("order_id").annotate(n=Count("id")).filter(n__gt=1).count(),
        paid_unsold=paid.exclude(order__status=Order.Status.PAID).count(),
        sold_unpaid=orders.filter(status=Order.Status.PAID).exclude(pk__in=paid.values("order_id")).count(),
        refunds_unrecorded=charges.filter(refunded_at__isnull=True, reference__in=refunded).count()
        + charges.filter(refunded_at__isnull=False).exclude(reference__in=refunded).count(),
    )
