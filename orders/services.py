"""Vouchers and the purchase: window, one order per user, and stock through the voucher's strategy."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.crowd import crowd_member
from core.errors import InvalidInput
from core.names import name_clean
from core.ratelimit import RateCount
from core.window import window_validate
from inventory.errors import SoldOut
from inventory.models import Strategy
from inventory.reservations import group_tag, reservations_client
from inventory.reserve import StateMissing, stock_reserve
from inventory.services import stock_create, stock_group_create, stock_restock
from inventory.stock import Take, choose_only, constraint_violated, stock_take

from .errors import AlreadyPurchased, NotForSale
from .models import Order, Voucher
from .reservations import (
    voucher_reservations_change,
    voucher_reservations_open,
    voucher_reservations_retire,
    voucher_reservations_start,
)
from .selectors import voucher_forget, voucher_get
from .tasks import voucher_reservations_drain, voucher_reservations_rebuild

ONE_PER_USER = "order_one_per_user"
# SQLite names the columns instead of the constraint.
ONE_PER_USER_SQLITE = "orders_order.voucher_id, orders_order.buyer_guard"


def strategy_validate(strategy: str) -> None:
    if strategy not in Strategy.values:
        raise InvalidInput(f"Unknown strategy {strategy!r}; use one of: {', '.join(Strategy.values)}.")


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
    strategy_validate(strategy)
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
    if strategy == Strategy.REDIS_LUA:
        transaction.on_commit(lambda: voucher_reservations_open(voucher=voucher, reservations=reservations_client()))
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
    """Change a voucher's window, strategy or description and/or add stock; all or nothing.

    Under ``redis_lua`` the state in Redis follows: a switch to it builds the state from
    the database, a switch away persists what waits and drops the state, and a new window
    or a restock is applied to the state too (``orders.reservations``).
    """
    new_begin = begin_at or voucher.begin_at
    new_end = end_at or voucher.end_at
    if begin_at is not None or end_at is not None:
        window_validate(new_begin, new_end)
    if strategy is not None:
        strategy_validate(strategy)

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

    was = Voucher.objects.values_list("strategy", flat=True).get(pk=voucher.pk)
    now = strategy or was
    reservations = reservations_client()
    if was == Strategy.REDIS_LUA and now != Strategy.REDIS_LUA:
        voucher_reservations_retire(voucher=voucher, reservations=reservations, then=change)
    elif was == Strategy.REDIS_LUA:
        # Redis holds the sale: the window and the units change there too, in step.
        voucher_reservations_change(voucher=voucher, reservations=reservations, change=change, restock=restock or 0)
    else:
        change()
        if now == Strategy.REDIS_LUA:
            voucher_reservations_start(voucher=voucher, reservations=reservations)
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

    Under ``redis_lua`` the purchase only reserves (``_order_reserve``): the order comes
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
    if voucher.strategy == Strategy.REDIS_LUA:
        try:
            return _order_reserve(user=user, voucher=voucher, rate=rate)
        except StateMissing:
            # Switched away since this voucher was read (or Redis lost the state).
            voucher_forget(voucher_id=voucher.pk)
            voucher = voucher_get(voucher_id=voucher.pk)
            if voucher.strategy == Strategy.REDIS_LUA:
                raise
            rate = None  # counted by the script already
    if rate is not None:
        rate.count(tag=group_tag(voucher.stock.group_id))
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


def _order_reserve(*, user: AbstractBaseUser, voucher: Voucher, rate: RateCount | None) -> Order:
    """The purchase under ``redis_lua``: one script call reserves the unit, and the order
    is written later by a worker. The answer is the order as it will be, pending, under
    the reservation's id (unsaved: ``pk`` is None). The window, the one-per-user rule and
    the stock are the script's to check, against Redis: nothing here reads the database."""
    reserved = stock_reserve(
        group_id=voucher.stock.group_id,
        user_id=user.pk,
        over_limit=AlreadyPurchased,
        persist_soon=lambda: voucher_reservations_drain.delay(voucher.pk, voucher.stock.group_id),
        rebuild_soon=lambda: voucher_reservations_rebuild.delay(voucher.pk),
        rate=rate,
    )
    return Order(user_id=user.pk, voucher=voucher, status=Order.Status.PENDING, reservation=reserved.reservation_id)
