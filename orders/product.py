"""The flash sale to the item core (``inventory.product``): a voucher is the rows of its stock
group (one, or one per bucket: ``inventory.buckets``) sold one unit per user, the first row
with stock first (of the buyer's bucket); its record is an order, written through the
one-per-user guard with the row it took."""

from __future__ import annotations

from datetime import datetime
from random import Random

from django.shortcuts import get_object_or_404
from django.utils import timezone

from accounts.crowd import crowd_member
from accounts.unlisted import unlisted_take_refuse
from inventory.errors import SoldOut
from inventory.product import Product
from inventory.redis_lua.values import Failed, Pending, Reserved, Rules, reservation_moment
from inventory.redis_lua.windows import hold_windows
from inventory.strategies.base import Take, choose_first
from inventory.take import hold_until

from .errors import AlreadyPurchased, NotForSale
from .models import Order, Voucher
from .selectors import VOUCHER_TAKE_STOCK


class VoucherProduct(Product):
    kind = "voucher"
    item_model = Voucher
    record_model = Order
    item_field = "voucher"
    group_field = "group_id"
    over_limit = AlreadyPurchased
    # The one-per-user key; SQLite names its columns instead.
    backstop = ("order_one_per_user", "orders_order.voucher_id, orders_order.buyer_guard")
    settled = Order.Status.PAID
    lapsed = Order.Status.EXPIRED
    unit_field = "stock_id"
    # A cancelled or expired order leaves its buyer free to buy again.
    release_clears = "buyer_guard"

    def take(
        self,
        voucher: Voucher,
        *,
        user_id: int,
        now: datetime | None,
        rng: Random | None,
        hold_until: datetime | None,
        **carried,
    ) -> Take[Order]:
        """``voucher.stock_left`` is the stock as read with the voucher, its group's rows summed
        (``voucher_get``; a voucher read without it is left to the strategy). Once it reads
        zero the buyer is told ``sold_out`` from that read, whatever the strategy: in a flash
        sale nearly everyone arrives after the sell-out, and none of them needs a lock, a
        transaction or a stock row. The read never sells anything; only the strategy's guarded
        write decides a sale. Where the group has one row (``stock_only_row``), that read is
        also ``admit``'s snapshot of it, which the strategies whose first read is unguarded
        take instead of reading it again; with several rows the strategy reads them itself.

        An unlisted voucher (a load run's own) is sold only to the load crowd
        (``accounts.crowd``): anyone else would skew its audit. Staff hear ``NotForSale``; others,
        who may not see the voucher at all, what an id of nothing answers (``accounts.unlisted``)."""
        if not voucher.listed and not crowd_member(user_id=user_id):
            unlisted_take_refuse(user_id=user_id, refusal=NotForSale())

        def check() -> None:
            # A cancelled or expired order leaves its buyer free to buy again (``Product.taking``).
            if self.taking_of(voucher.pk, user_id).exists():
                raise AlreadyPurchased()

        def window_check() -> None:
            voucher.window_check(now or timezone.now())

        def admit() -> dict[int, int] | None:
            window_check()
            left = getattr(voucher, "stock_left", None)
            if left is not None and left < 1:
                check()  # a buyer who has an order hears so, not sold_out
                raise SoldOut()
            only_row = getattr(voucher, "stock_only_row", None)
            return None if left is None or only_row is None else {only_row: left}

        def record(stock_id: int | None, guarded: bool) -> Order:
            return Order.objects.create(
                user_id=user_id,
                voucher_id=voucher.pk,
                stock_id=stock_id,
                status=Order.Status.HELD if hold_until else Order.Status.CONFIRMED,
                hold_until=hold_until,
                buyer_guard=user_id if guarded else None,
            )

        return Take(
            group_id=voucher.group_id,
            choose=choose_first,
            check=check,
            record=record,
            admit=admit,
            window_check=window_check,
            user_id=user_id,
            buckets=voucher.buckets,
            **carried,
        )

    def read(self, item_id: int) -> Voucher:
        """The voucher with what a take reads of its stock (``Http404`` when there is none):
        the selectors' annotations, not a call into them, on a take's path."""
        return get_object_or_404(Voucher.objects.annotate(**VOUCHER_TAKE_STOCK), pk=item_id)

    def rules(self, item: Voucher) -> Rules:
        return Rules(
            begin_at=item.begin_at,
            end_at=item.end_at,
            limit=1,
            abandon_limit=item.abandon_limit,
            abandon_cooldown=item.abandon_cooldown_seconds,
            hold_seconds=item.hold_seconds,
        )

    def rows(self, item_id: int, fresh: list[Pending]) -> list[Order]:
        windows = hold_windows(fresh, lambda: Voucher.objects.values_list("hold_seconds", flat=True).get(pk=item_id))
        return [
            Order(
                user_id=one.user_id,
                voucher_id=item_id,
                stock_id=one.stock_id,
                status=Order.Status.HELD if window else Order.Status.CONFIRMED,
                hold_until=hold_until(window, reservation_moment(one)),
                # Written through the one-per-user backstop, as every safe strategy does.
                buyer_guard=one.user_id,
                reservation=one.reservation_id,
            )
            for one, window in zip(fresh, windows, strict=True)
        ]

    def reserved(self, item: Voucher, user_id: int, reserved: Reserved) -> Order:
        return Order(
            user_id=user_id,
            voucher=item,
            stock_id=reserved.stock_id,
            status=Order.Status.PENDING,
            reservation=reserved.reservation_id,
        )

    def unsaved(self, found: Pending | Failed, item: Voucher, **fields) -> Order:
        return Order(
            user_id=found.user_id, voucher=item, stock_id=found.stock_id, reservation=found.reservation_id, **fields
        )


VOUCHER = VoucherProduct()
