"""Reads of vouchers and orders, and the audit of a voucher's invariants (docs/design.md, "Invariants")."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404

from inventory.models import Stock

from .models import Order, Voucher


def voucher_list() -> QuerySet[Voucher]:
    return Voucher.objects.select_related("stock").order_by("begin_at", "id")


def voucher_get(*, voucher_id: int) -> Voucher:
    """The voucher with its stock; raises ``Http404`` when there is none."""
    return get_object_or_404(Voucher.objects.select_related("stock"), pk=voucher_id)


def order_list(*, user) -> QuerySet[Order]:
    return Order.objects.filter(user_id=user.pk).select_related("voucher")


def order_get(*, user, order_id: int) -> Order:
    """The caller's own order; another user's order is as good as missing (``Http404``)."""
    return get_object_or_404(order_list(user=user), pk=order_id)


@dataclass(frozen=True)
class VoucherAudit:
    voucher_id: int
    title: str
    strategy: str
    supplied: int
    stock: int
    orders: int
    pending: int
    buyers: int
    oversold: int
    duplicates: int
    conserved: bool
    stock_not_negative: bool

    @property
    def ok(self) -> bool:
        return self.oversold == 0 and self.duplicates == 0 and self.conserved and self.stock_not_negative

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def voucher_audit(*, voucher_id: int) -> VoucherAudit:
    """The invariants of one voucher, read from the database as it is now.

    ``supplied`` is the initial stock plus every restock; ``oversold`` is how many
    orders exceed it and ``duplicates`` how many orders repeat a (user, voucher).
    """
    voucher = Voucher.objects.get(pk=voucher_id)
    stock = Stock.objects.get(pk=voucher.stock_id)
    totals = Order.objects.filter(voucher_id=voucher_id).aggregate(
        orders=Count("id"),
        pending=Count("id", filter=Q(status=Order.Status.PENDING)),
        buyers=Count("user_id", distinct=True),
    )
    return VoucherAudit(
        voucher_id=voucher.pk,
        title=voucher.title,
        strategy=voucher.strategy,
        supplied=stock.initial_quantity,
        stock=stock.quantity,
        orders=totals["orders"],
        pending=totals["pending"],
        buyers=totals["buyers"],
        oversold=max(0, totals["orders"] - stock.initial_quantity),
        duplicates=totals["orders"] - totals["buyers"],
        conserved=stock.quantity + totals["orders"] == stock.initial_quantity,
        stock_not_negative=stock.quantity >= 0,
    )
