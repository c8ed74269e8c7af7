"""A buyer's payment of a held order, and the simulated provider's ledger of its charges."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from orders.models import Order


class Payment(models.Model):
    """One call to pay one held order, charged at the provider under ``reference``, and
    resolved once by the provider's confirmation: ``paid`` (the order with it) or
    ``refunded`` (the order was not held any more when the confirmation came)."""

    class Status(models.TextChoices):
        REQUESTED = "requested", "requested"
        PAID = "paid", "paid"
        REFUNDED = "refunded", "refunded"

    order = models.ForeignKey(Order, on_delete=models.PROTECT, related_name="payments")
    # The provider's id of the charge (the callback names it).
    reference = models.CharField(max_length=32, unique=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.REQUESTED)
    # The order's id while the payment waits for its confirmation, NULL once resolved: unique,
    # so that an order waits on one payment at a time (MySQL has no partial unique index, and
    # NULLs never collide). A second pay meanwhile is answered with the first.
    open_guard = models.BigIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    settled_at = models.DateTimeField(null=True, blank=True)
    refunded_at = models.DateTimeField(null=True, blank=True)
    # The order's state that refused the confirmation: expired, cancelled, already_paid.
    refund_reason = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["open_guard"], name="payment_one_open_per_order"),
            # Resolved once, to exactly one outcome: what the callback's row lock decides, the
            # database holds.
            models.CheckConstraint(
                condition=(
                    Q(status="requested", open_guard__isnull=False, settled_at__isnull=True, refunded_at__isnull=True)
                    | Q(status="paid", open_guard__isnull=True, settled_at__isnull=False, refunded_at__isnull=True)
                    | Q(status="refunded", open_guard__isnull=True, settled_at__isnull=True, refunded_at__isnull=False)
                ),
                name="payment_one_outcome",
            ),
        ]

    def __str__(self) -> str:
        return f"Payment {self.reference} of order {self.order_id}: {self.status}"


class ProviderCharge(models.Model):
    """The simulated provider's own record of a charge (``payments.provider``): what it
    confirmed, how often it called back, whether the site acknowledged a callback, and
    whether the site refunded it. Kept apart from ``Payment``, as a provider's books are."""

    reference = models.CharField(max_length=32, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # When its last callback was due to leave (a lost one included); a resend is due
    # ``PAYMENT_PROVIDER_RESEND_SECONDS`` after it while no callback was acknowledged.
    sent_at = models.DateTimeField()
    # Callbacks sent, and those the site answered 2xx (the first ends the resends).
    callbacks = models.PositiveIntegerField(default=0)
    acknowledgements = models.PositiveIntegerField(default=0)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    refunded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["acknowledged_at", "sent_at"], name="charge_resend_due")]

    def __str__(self) -> str:
        return f"Charge {self.reference}"
