"""The purchase: window, one order per user, and stock through the voucher's strategy."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError
from django.utils import timezone

from inventory.errors import Ended, NotStarted, SoldOut
from inventory.models import Voucher
from inventory.stock import Take, constraint_violated, stock_take

from .errors import AlreadyPurchased
from .models import Order

ONE_PER_USER = "order_one_per_user"
# SQLite names the columns instead of the constraint.
ONE_PER_USER_SQLITE = "orders_order.voucher_id, orders_order.buyer_guard"


def order_purchase(*, user: AbstractBaseUser, voucher: Voucher, now: datetime | None = None) -> Order:
    """Buy one unit of ``voucher`` for ``user``.

    Raises ``NotStarted``/``Ended`` outside the sale window, ``AlreadyPurchased``
    when the user has an order for it, ``SoldOut`` when stock is gone and
    ``LockBusy`` when the strategy gave up under contention. On any error nothing
    is written.

    ``voucher.stock`` is the stock as read with the voucher (``voucher_get``
    selects it). Once it reads zero the buyer is told ``sold_out`` from that read,
    whatever the strategy: in a flash sale nearly everyone arrives after the
    sell-out, and none of them needs a lock, a transaction or the stock row. The
    read never sells anything; only the strategy's guarded write decides a sale.
    """
    state = voucher.window_state(now or timezone.now())
    if state == "upcoming":
        raise NotStarted()
    if state == "ended":
        raise Ended()

    def check() -> None:
        if Order.objects.filter(voucher_id=voucher.pk, user_id=user.pk).exists():
            raise AlreadyPurchased()

    if voucher.stock.quantity < 1:
        check()  # a buyer who has an order hears so, not sold_out
        raise SoldOut()

    def record(guarded: bool) -> Order:
        return Order.objects.create(
            user_id=user.pk,
            voucher_id=voucher.pk,
            status=Order.Status.CONFIRMED,
            buyer_guard=user.pk if guarded else None,
        )

    take = Take(
        stock_id=voucher.stock_id,
        quantity=1,
        user_key=f"voucher:{voucher.pk}:user:{user.pk}",
        check=check,
        record=record,
    )
    try:
        return stock_take(strategy=voucher.strategy, take=take)
    except IntegrityError as exc:
        if constraint_violated(exc, ONE_PER_USER) or constraint_violated(exc, ONE_PER_USER_SQLITE):
            raise AlreadyPurchased() from exc
        raise
