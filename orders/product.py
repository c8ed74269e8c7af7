"""The flash sale to the item core (``inventory.product``): a voucher is one stock row sold
one per user; its record is an order, written through the one-per-user guard."""

from __future__ import annotations

from inventory.product import Product
from inventory.reservation_types import Failed, Pending, Reserved, Rules

from .errors import AlreadyPurchased
from .models import Order, Voucher
from .selectors import voucher_get


class VoucherProduct(Product):
    kind = "voucher"
    item_model = Voucher
    record_model = Order
    item_field = "voucher"
    group_field = "stock__group_id"
    over_limit = AlreadyPurchased

    def items(self):
        return Voucher.objects.select_related("stock")

    def group_of(self, item: Voucher) -> int:
        return item.stock.group_id

    def read(self, item_id: int) -> Voucher:
        return voucher_get(voucher_id=item_id)

    def rules(self, item: Voucher) -> Rules:
        return Rules(begin_at=item.begin_at, end_at=item.end_at, limit=1)

    def rows(self, item_id: int, fresh: list[Pending]) -> list[Order]:
        return [
            Order(
                user_id=one.user_id,
                voucher_id=item_id,
                status=Order.Status.CONFIRMED,
                # Written through the one-per-user backstop, as every safe strategy does.
                buyer_guard=one.user_id,
                reservation=one.reservation_id,
            )
            for one in fresh
        ]

    def reserved(self, item: Voucher, user_id: int, reserved: Reserved) -> Order:
        return Order(user_id=user_id, voucher=item, status=Order.Status.PENDING, reservation=reserved.reservation_id)

    def unsaved(self, found: Pending | Failed, item: Voucher, **fields) -> Order:
        return Order(user_id=found.user_id, voucher=item, reservation=found.reservation_id, **fields)


VOUCHER = VoucherProduct()
