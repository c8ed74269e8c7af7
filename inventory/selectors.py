"""Reads of vouchers and stock."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from .models import Voucher


def voucher_list() -> QuerySet[Voucher]:
    return Voucher.objects.select_related("stock").order_by("begin_at", "id")


def voucher_get(*, voucher_id: int) -> Voucher:
    """The voucher with its stock; raises ``Http404`` when there is none."""
    return get_object_or_404(Voucher.objects.select_related("stock"), pk=voucher_id)
