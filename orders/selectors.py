"""Reads of vouchers and orders, and the audit of a voucher's invariants (docs/design.md, "Invariants")."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from accounts.unlisted import item_shown
from core.errors import Unavailable
from inventory.audits import Audit, HoldCounts, record_totals
from inventory.items import items_shown, record_get, records_of_user, reservation_takes
from inventory.models import Stock, StockGroup, Strategy
from inventory.paging import PAGE_SIZE, Cursor, Page
from inventory.product import product_of
from inventory.records import TAKING
from inventory.totals import ItemMarks, stock_only_row, stock_sums

from .models import Order, Voucher

# A voucher's stock, its group's rows summed in the query that reads the voucher.
# A voucher's stock as every read that shows or checks it reads it (``vouchers_stocked``).
VOUCHER_STOCK = {**stock_sums(Voucher), **stock_only_row(Voucher)}
# What a take reads of it: the units left (sold out is answered from them) and its one row's
# id, the snapshot its first read takes (``orders.product``); not the other sums.
VOUCHER_TAKE_STOCK = {**stock_sums(Voucher, "stock_left"), **stock_only_row(Voucher)}


def vouchers_stocked(vouchers: QuerySet[Voucher] | None = None) -> QuerySet[Voucher]:
    """The vouchers (``vouchers``, every one by default), each read with its stock
    (``inventory.totals.stock_sums``): ``stock_left``, ``stock_supplied`` and
    ``stock_taken``, its group's rows summed. What every read of a voucher that shows or
    checks its stock starts from."""
    return (Voucher.objects.all() if vouchers is None else vouchers).annotate(**VOUCHER_STOCK)


def voucher_list() -> QuerySet[Voucher]:
    """The vouchers for sale (not the race lab's own, nor those ended more than a day ago:
    ``inventory.items.items_shown``), by when they begin, with their stock."""
    return items_shown(vouchers_stocked()).order_by("begin_at", "id")


def voucher_get(*, voucher_id: int) -> Voucher:
    """The voucher with its stock (:func:`vouchers_stocked`); raises ``Http404`` when there is none."""
    return get_object_or_404(vouchers_stocked(), pk=voucher_id)


def voucher_shown(*, voucher_id: int, user) -> Voucher:
    """The voucher as :func:`voucher_get` reads it, for ``user`` to see: an unlisted one (a load
    run's own) is as missing (``Http404``) to all but staff and the load crowd
    (``accounts.unlisted``)."""
    return item_shown(voucher_get(voucher_id=voucher_id), user=user)


def order_list(*, user) -> QuerySet[Order]:
    """The user's orders that are rows: confirmed ones."""
    return Order.objects.filter(user_id=user.pk).select_related("voucher")


def order_page(*, user, after: Cursor | None = None, size: int = PAGE_SIZE, reserved: bool = True) -> Page[Order]:
    """A page of the user's orders, newest first (``inventory.paging``): the rows, and with
    ``reserved``, under ``redis_lua``, those still pending or failed, read from Redis (unsaved
    orders with their reservation's id). The page's vouchers, and its orders' payments (for
    :func:`order_refund` and :func:`order_paying`), come in one read each."""
    # Not joined: with the vouchers in the query, MariaDB may start from the (small) voucher
    # table and sort every order of the user, where alone it reads the page from the index.
    rows = order_list(user=user).select_related(None).prefetch_related("voucher", "payments")
    return records_of_user(product_of("voucher"), user_id=user.pk, rows=rows, after=after, size=size, reserved=reserved)


def order_get(*, user, order_id: int) -> Order:
    """The caller's own order by the id they know it by (``Order.public_id``); another
    user's order is as good as missing (``Http404``). Read with its voucher: what a
    cancel or a pay of it reads of it (its strategy and group, ``inventory.holds``)."""
    rows = order_list(user=user).select_related("voucher")
    return record_get(product_of("voucher"), record_id=order_id, user_id=user.pk, rows=rows)


def order_refund(*, order: Order) -> dict | None:
    """The refund of the order's payment whose confirmation came after the hold ended, or
    None. Payments stand above the orders (``payments``) and give each order its
    ``payments``: read through that relation, not imported, and from what a list read for
    its page at once (``order_page``) when it did."""
    # Pending under redis_lua (not written), or never held (paid when made): nothing to
    # refund, and a single order asks nothing for them.
    if order.pk is None or order.hold_until is None:
        return None
    refunds = [payment for payment in order.payments.all() if payment.refunded_at is not None]
    if not refunds:
        return None
    refund = max(refunds, key=lambda payment: payment.refunded_at)
    return {"reference": refund.reference, "refunded_at": refund.refunded_at, "reason": refund.refund_reason}


def order_paying(*, order: Order) -> bool:
    """Whether a payment of the held order waits for the provider's confirmation (read
    through the payments' relation, as :func:`order_refund` reads)."""
    return order.pk is not None and any(
        payment.settled_at is None and payment.refunded_at is None for payment in order.payments.all()
    )


def voucher_held(*, voucher: Voucher, user) -> str | None:
    """What the user holds of the voucher, for the page's Buy button: the status of their
    order that still holds its unit (``"confirmed"``, ``"held"``, ``"paid"``), ``"pending"``
    (under ``redis_lua``, a reservation not written yet) or None: an order cancelled or
    expired holds nothing, and its buyer may buy again.

    Polled by every open voucher page, so it reads no stream: the user's count in the
    state's ``takers`` hash (one HGET) counts pending takes and written ones alike, and an
    undone reservation gives its take back. Should Redis not answer, the row decides: a
    guess for the button, the purchase still refuses a second one."""
    status = product_of("voucher").taking_of(voucher.pk, user.pk).values_list("status", flat=True).first()
    if status is not None:
        return status
    if voucher.strategy != Strategy.REDIS_LUA:
        return None
    try:
        takes = reservation_takes(group_id=voucher.group_id, user_id=user.pk, buckets=voucher.buckets)
    except Unavailable:
        return None
    return Order.Status.PENDING if takes > 0 else None


def voucher_held_order(*, voucher: Voucher, user) -> Order | None:
    """The user's order of the voucher held for its payment, if any: the voucher's page shows
    it with Pay and Cancel, as the purchase answered it (one row, on ``order_voucher_user_status``)."""
    return Order.objects.filter(voucher=voucher, user=user, status=Order.Status.HELD).first()


@dataclass(frozen=True)
class VoucherAudit(Audit):
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
    # Orders held for payment, paid (or paid when made), released (cancelled, expired).
    holds: HoldCounts = HoldCounts()
    # Whether the running totals the pages read (inventory.totals) say what the orders say.
    totals_agree: bool = True

    @property
    def ok(self) -> bool:
        return (
            self.oversold == 0
            and self.duplicates == 0
            and self.conserved
            and self.stock_not_negative
            and self.holds.ok
            and self.totals_agree
        )


def voucher_audit(*, voucher_id: int) -> VoucherAudit:
    """The invariants of one voucher, read from the database as it is now.

    ``supplied`` is the initial stock plus every restock, over the rows of the voucher's
    group. The orders that hold a unit (held, paid) and the stock must add up to it;
    ``oversold`` is how many of those orders exceed it and ``duplicates`` how many repeat a
    (user, voucher). A released order holds none: its unit went back to the stock, once.
    """
    (audit,) = voucher_audits(voucher_ids=[voucher_id])
    return audit


def voucher_audits(*, voucher_ids: list[int]) -> list[VoucherAudit]:
    """``voucher_audit`` of each voucher of ``voucher_ids``, in that order, in four queries
    whatever their number: the vouchers with their stock and group, their orders counted in
    one pass grouped by voucher, and by voucher and user, and their stock rows with the
    orders that hold each (``manage.py audit``). ``Voucher.DoesNotExist`` for an id of none."""
    vouchers = vouchers_stocked().select_related("group").in_bulk(voucher_ids)
    if missing := set(voucher_ids) - set(vouchers):
        raise Voucher.DoesNotExist(f"no voucher {sorted(missing)}")
    counted = Order.objects.filter(voucher_id__in=voucher_ids).order_by().values("voucher_id")
    totals = {row.pop("voucher_id"): row for row in counted.annotate(**record_totals())}
    no_orders = dict.fromkeys(record_totals(), 0)
    repeaters = _repeaters(voucher_ids)
    rows = _rows_held([voucher.group_id for voucher in vouchers.values()])
    return [
        _voucher_audit(
            vouchers[voucher_id],
            totals.get(voucher_id, no_orders),
            repeaters.get(voucher_id, 0),
            rows.get(vouchers[voucher_id].group_id, (True, 0)),
        )
        for voucher_id in voucher_ids
    ]


def _rows_held(group_ids: list[int]) -> dict[int, tuple[bool, int]]:
    """{group id: (whether each of its stock rows' running total of units taken is the
    orders that hold a unit of that row, the orders that hold one of its rows)}: what the
    orders say of each row, read from the row each order carries (``Order.stock``)."""
    holding = Count("orders", filter=Q(orders__status__in=TAKING))
    rows = Stock.objects.filter(group_id__in=group_ids).annotate(holding=holding).order_by()
    held: dict[int, tuple[bool, int]] = {}
    for group_id, taken, n in rows.values_list("group_id", "taken", "holding"):
        agree, total = held.get(group_id, (True, 0))
        held[group_id] = (agree and taken == n, total + n)
    return held


def _repeaters(voucher_ids: list[int]) -> dict[int, int]:
    """{voucher id: users holding more than one of its orders}: what the running total of
    users past the one-per-user rule must say (``StockGroup.over_takers``)."""
    per_user = (
        product_of("voucher")
        .taking(Order.objects.filter(voucher_id__in=voucher_ids))
        .order_by()
        .values("voucher_id", "user_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    return dict(Counter(row["voucher_id"] for row in per_user))


def _voucher_audit(voucher: Voucher, totals: dict, repeaters: int, rows: tuple[bool, int]) -> VoucherAudit:
    """The audit from the voucher read with its stock and group, the counts
    (``record_totals``), the users holding more than one order, and what its orders say of
    its stock rows (``_rows_held``)."""
    taking = totals["held"] + totals["settled"]
    rows_agree, held_by_rows = rows
    return VoucherAudit(
        voucher_id=voucher.pk,
        title=voucher.title,
        strategy=voucher.strategy,
        supplied=voucher.stock_supplied,
        stock=voucher.stock_left,
        orders=totals["records"],
        pending=totals["pending"],
        buyers=totals["takers"],
        oversold=max(0, taking - voucher.stock_supplied),
        duplicates=taking - totals["takers"],
        conserved=voucher.stock_left + taking == voucher.stock_supplied,
        stock_not_negative=voucher.stock_left >= 0,
        holds=HoldCounts.of(totals),
        # Each row's total is what the orders that carry it hold, and every order that holds a
        # unit carries one of the voucher's rows.
        totals_agree=rows_agree
        and (voucher.stock_taken, held_by_rows, voucher.group.over_takes, voucher.group.over_takers)
        == (taking, taking, taking - totals["takers"], repeaters),
    )


def voucher_list_marked() -> list[Voucher]:
    """The vouchers of ``voucher_list``, each with ``marks``: what its running totals say
    (``inventory.totals``), read with it in one query however many orders it has.

    The list page polls this every few seconds per open tab: it counts no order."""
    vouchers = list(voucher_list().select_related("group"))
    for voucher in vouchers:
        voucher.marks = ItemMarks.summed(voucher, voucher.group)
    return vouchers


def voucher_marks(*, voucher: Voucher) -> ItemMarks:
    """What the running totals of the voucher, read with its stock (``voucher_get``), say, for
    its page (one read of its group's row)."""
    return ItemMarks.summed(voucher, StockGroup.objects.get(pk=voucher.group_id))


def voucher_buy_refusal(*, voucher: Voucher, bought: bool, now: datetime | None = None) -> str | None:
    """The code of the refusal a purchase would get now (``orders.services.order_purchase``),
    or ``None`` when it may sell: what the page disables the Buy button for, and says.

    The buyer's own order comes first, as the reason that lasts; then the window; then
    the stock as read with the voucher. A guess from a read, never a decision: the
    service decides under the voucher's strategy.
    """
    if bought:
        return "already_purchased"
    refusal = voucher.window_refusal(now or timezone.now())
    if refusal is not None:
        return refusal
    if voucher.stock_left < 1:
        return "sold_out"
    return None
