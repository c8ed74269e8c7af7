"""Vouchers and the purchase: window, one order per user, and stock through the voucher's strategy."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.crowd import crowd_member
from core.names import name_clean
from core.ratelimit import RateCount
from core.window import window_validate
from inventory.errors import SoldOut
from inventory.item_reserve import item_reserve
from inventory.item_states import item_created, item_update
from inventory.services import stock_create, stock_group_create, stock_restock
from inventory.strategies import stock_take
from inventory.strategies.base import Take, choose_only, constraint_violated
from inventory.validators import strategy_valid

from .errors import AlreadyPurchased, NotForSale
from .models import Order, Voucher
from .product import VOUCHER

ONE_PER_USER = "order_one_per_user"
# SQLite names the columns instead of the constraint.
ONE_PER_USER_SQLITE = "orders_order.voucher_id, orders_order.buyer_guard"


@transaction.atomic
def voucher_create(
    *,
    title: str,
    stock: int,
    begin_at: datetime,
    end_at: datetime,
    strategy: str,
    description: str = "",
    listed: bool = True,
) -> Voucher:
    """A voucher with ``stock`` units in a stock group of its own; ``listed=False`` keeps
    it out of the shop's lists (a load test's own)."""
    title = name_clean(title, field="title")
    window_validate(begin_at, end_at)
    strategy_valid(strategy)
    stock_row = stock_create(group=stock_group_create(), quantity=stock)
    voucher = Voucher.objects.create(
        title=title,
        description=description,
        begin_at=begin_at,
        end_at=end_at,
        strategy=strategy,
        stock=stock_row,
        listed=listed,
    )
    item_created(VOUCHER, voucher)
    return voucher


def voucher_update(
    *,
    voucher: Voucher,
    restock: int | None = None,
    strategy: str | None = None,
    begin_at: datetime | None = None,
    end_at: datetime | None = None,
    description: str | None = None,
) -> Voucher:
    """Change a voucher's window, strategy or description and/or add stock; all or nothing,
    with its ``redis_lua`` state in step (``inventory.item_states.item_update``)."""
    new_begin = begin_at or voucher.begin_at
    new_end = end_at or voucher.end_at
    if begin_at is not None or end_at is not None:
        window_validate(new_begin, new_end)
    if strategy is not None:
        strategy_valid(strategy)

    @transaction.atomic
    def change() -> None:
        fields = []
        if strategy is not None:
            voucher.strategy = strategy
            fields.append("strategy")
        if begin_at is not None or end_at is not None:
            voucher.begin_at, voucher.end_at = new_begin, new_end
            fields += ["begin_at", "end_at"]
        if description is not None:
            voucher.description = description
            fields.append("description")
        if fields:
            voucher.save(update_fields=fields)
        if restock is not None:
            stock_restock(stock_id=voucher.stock_id, quantity=restock)

    added = {voucher.stock_id: restock} if restock else {}
    item_update(VOUCHER, voucher, change, switch_to=strategy, units=lambda done: added)
    voucher.stock.refresh_from_db()
    return voucher


def order_purchase(
    *, user: AbstractBaseUser, voucher: Voucher, now: datetime | None = None, rate: RateCount | None = None
) -> Order:
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
    It is also the take's snapshot, which the strategies whose own read is
    unguarded use instead of reading again.

    Under ``redis_lua`` the purchase only reserves (``inventory.item_reserve``): the order comes
    back pending, and ``StateMissing`` (503) is raised while the voucher's Redis state
    is missing.

    ``rate``, the request's rate limits (``core.ratelimit.rate_count``), is counted on
    this voucher first, in the reserving script's own round trip under ``redis_lua``:
    ``RateLimited`` (429) when over one.

    An unlisted voucher (a load run's own) is sold only to the load crowd
    (``accounts.crowd``): ``NotForSale`` for anyone else, who would skew its audit.
    """
    if not voucher.listed and not crowd_member(user_id=user.pk):
        raise NotForSale()
    attempt = item_reserve(VOUCHER, voucher, user_id=user.pk, rate=rate)
    if attempt.record is not None:
        return attempt.record
    voucher = attempt.item
    voucher.window_check(now or timezone.now())

    def check() -> None:
        if Order.objects.filter(voucher_id=voucher.pk, user_id=user.pk).exists():
            raise AlreadyPurchased()

    if voucher.stock.quantity < 1:
        check()  # a buyer who has an order hears so, not sold_out
        raise SoldOut()

    def record(stock_id: int | None, guarded: bool) -> Order:
        return Order.objects.create(
            user_id=user.pk,
            voucher_id=voucher.pk,
            status=Order.Status.CONFIRMED,
            buyer_guard=user.pk if guarded else None,
        )

    take = Take(
        group_id=voucher.stock.group_id,
        choose=choose_only,
        user_key=f"voucher:{voucher.pk}:user:{user.pk}",
        check=check,
        record=record,
        snapshot={voucher.stock_id: voucher.stock.quantity},
    )
    try:
        return stock_take(strategy=voucher.strategy, take=take)
    except IntegrityError as exc:
        if constraint_violated(exc, ONE_PER_USER) or constraint_violated(exc, ONE_PER_USER_SQLITE):
            raise AlreadyPurchased() from exc
        raise
