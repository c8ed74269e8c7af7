"""What the stock keeps of its records, set once a big site's records are written in bulk
around the strategies (``config.big_site``)."""

from __future__ import annotations

from django.db.models import Count, F

from inventory.models import Stock
from inventory.records import TAKING
from inventory.totals import totals_recount
from lottery.models import Draw, Pool
from lottery.product import POOL
from orders.models import Order, Voucher
from orders.product import VOUCHER


def stock_recount_from_records(*, vouchers: list[Voucher], pools: list[Pool]) -> None:
    """Set what the stock keeps of the records written in bulk around the strategies: each
    row's ``initial_quantity`` is the units left (its ``quantity``, as created) plus the
    records holding a unit (held, paid, claimed, or settled when taken). Everything the stock
    tables keep of their records is set here, one grouped query per product."""
    orders = (
        Order.objects.filter(voucher__in=vouchers, status__in=TAKING).values_list("stock_id").annotate(n=Count("id"))
    )
    draws = (
        Draw.objects.filter(pool__in=pools, stock__isnull=False, status__in=TAKING)
        .values_list("stock_id")
        .annotate(n=Count("id"))
    )
    for stock_id, taken in [*orders, *draws]:
        Stock.objects.filter(pk=stock_id).update(initial_quantity=F("quantity") + taken)
    # The running totals the pages read (inventory.totals), as the takes would have kept them.
    totals_recount(VOUCHER, item_ids=[voucher.pk for voucher in vouchers])
    totals_recount(POOL, item_ids=[pool.pk for pool in pools])
