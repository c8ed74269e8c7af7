"""Pools, prizes and the draw: window, per-user limit, and a prize chosen by remaining stock
under the pool's strategy."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from random import Random
from typing import NoReturn, TypeVar

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.crowd import crowd_member
from core.errors import InvalidInput
from core.names import name_clean
from core.ratelimit import RateCount
from core.window import window_validate
from inventory.errors import SoldOut
from inventory.item_reserve import item_reserve
from inventory.item_states import item_created, item_update
from inventory.services import stock_create, stock_group_create, stock_restock
from inventory.strategies import stock_take
from inventory.strategies.base import Take, constraint_violated
from inventory.validators import strategy_valid, whole

from .errors import DrawLimit, NotOpen, PoolEmpty
from .models import Draw, Pool, Prize
from .product import POOL

MAX_DRAWS_PER_USER = 1_000_000
MAX_NO_PRIZE_WEIGHT = 1_000_000_000
ONE_PER_SEQ = "draw_one_per_seq"
# SQLite names the columns instead of the constraint.
ONE_PER_SEQ_SQLITE = "lottery_draw.pool_id, lottery_draw.user_guard, lottery_draw.seq"

_system_random = secrets.SystemRandom()

R = TypeVar("R")


def _value(value: Decimal | int | float | str) -> Decimal:
    try:
        amount = Decimal(str(value))
    except ArithmeticError:
        raise InvalidInput("value must be a number.") from None
    if not amount.is_finite() or amount < 0 or amount >= Decimal("1e10"):
        raise InvalidInput("value must be zero or more, below 10,000,000,000.")
    return amount.quantize(Decimal("0.01"))


@transaction.atomic
def pool_create(
    *,
    name: str,
    begin_at: datetime,
    end_at: datetime,
    draws_per_user: int,
    no_prize_weight: int,
    strategy: str,
    description: str = "",
    listed: bool = True,
) -> Pool:
    """A pool with no prizes yet (add them with :func:`prize_create`); ``listed=False``
    keeps it out of the shop's lists (a load test's own)."""
    window_validate(begin_at, end_at)
    pool = Pool.objects.create(
        name=name_clean(name),
        description=description,
        begin_at=begin_at,
        end_at=end_at,
        draws_per_user=whole(draws_per_user, name="draws_per_user", minimum=1, maximum=MAX_DRAWS_PER_USER),
        no_prize_weight=whole(no_prize_weight, name="no_prize_weight", minimum=0, maximum=MAX_NO_PRIZE_WEIGHT),
        strategy=strategy_valid(strategy),
        group=stock_group_create(),
        listed=listed,
    )
    item_created(POOL, pool)
    return pool


def pool_update(
    *,
    pool: Pool,
    strategy: str | None = None,
    begin_at: datetime | None = None,
    end_at: datetime | None = None,
    draws_per_user: int | None = None,
    no_prize_weight: int | None = None,
    description: str | None = None,
) -> Pool:
    """Change a pool's strategy, window, limit, no-prize weight or description; all or
    nothing, with its ``redis_lua`` state in step (``inventory.item_states.item_update``)."""
    changes: dict[str, object] = {}
    if begin_at is not None or end_at is not None:
        changes["begin_at"], changes["end_at"] = begin_at or pool.begin_at, end_at or pool.end_at
        window_validate(changes["begin_at"], changes["end_at"])
    if strategy is not None:
        changes["strategy"] = strategy_valid(strategy)
    if draws_per_user is not None:
        changes["draws_per_user"] = whole(draws_per_user, name="draws_per_user", minimum=1, maximum=MAX_DRAWS_PER_USER)
    if no_prize_weight is not None:
        changes["no_prize_weight"] = whole(
            no_prize_weight, name="no_prize_weight", minimum=0, maximum=MAX_NO_PRIZE_WEIGHT
        )
    if description is not None:
        changes["description"] = description

    def change() -> None:
        for field, value in changes.items():
            setattr(pool, field, value)
        if changes:
            pool.save(update_fields=list(changes))

    _pool_change(pool, change, switch_to=changes.get("strategy"))
    return pool


def _pool_change(pool: Pool, change: Callable[[], R], *, switch_to=None, units=None) -> R:
    """``change()`` (database writes that commit), with the pool's Redis state in step
    (``inventory.item_states.item_update``); ``units(done)`` says the units added per stock row."""
    return item_update(POOL, pool, change, switch_to=switch_to, units=units)


def prize_create(*, pool: Pool, name: str, stock: int, description: str = "", value: Decimal | int | str = 0) -> Prize:
    """A prize of ``stock`` units, a new row of the pool's stock group (and of its Redis
    state under ``redis_lua``)."""
    name = name_clean(name)
    amount = _value(value)

    @transaction.atomic
    def create() -> Prize:
        return Prize.objects.create(
            pool=pool,
            name=name,
            description=description,
            value=amount,
            stock=stock_create(group=pool.group, quantity=stock),
        )

    return _pool_change(pool, create, units=lambda prize: {prize.stock_id: stock})


def prize_update(
    *,
    prize: Prize,
    restock: int | None = None,
    name: str | None = None,
    description: str | None = None,
    value: Decimal | int | str | None = None,
) -> Prize:
    """Rename or revalue a prize and/or add units through the guarded restock; all or nothing."""
    changes: dict[str, object] = {}
    if name is not None:
        changes["name"] = name_clean(name)
    if description is not None:
        changes["description"] = description
    if value is not None:
        changes["value"] = _value(value)

    @transaction.atomic
    def change() -> None:
        for field, new in changes.items():
            setattr(prize, field, new)
        if changes:
            prize.save(update_fields=list(changes))
        if restock is not None:
            stock_restock(stock_id=prize.stock_id, quantity=restock)

    if restock is None:
        change()
    else:
        _pool_change(prize.pool, change, units=lambda done: {prize.stock_id: restock})
    prize.stock.refresh_from_db()
    return prize


def weighted_choice(*, no_prize_weight: int, rng: Random) -> Callable[[Mapping[int, int]], int | None]:
    """A chooser that picks stock row i with probability ``remaining_i / (sum + no_prize_weight)``,
    and nothing with the rest.

    Integer arithmetic only: one ticket is drawn uniformly from ``sum + no_prize_weight``
    and walks the rows in id order, so the odds are exact whatever the numbers.
    """

    def choose(remaining: Mapping[int, int]) -> int | None:
        ticket = rng.randrange(sum(remaining.values()) + no_prize_weight)
        for stock_id in sorted(remaining):
            if ticket < remaining[stock_id]:
                return stock_id
            ticket -= remaining[stock_id]
        return None

    return choose


def pool_draw(
    *,
    user: AbstractBaseUser,
    pool: Pool,
    rng: Random | None = None,
    now: datetime | None = None,
    rate: RateCount | None = None,
) -> Draw:
    """Draw once in ``pool`` for ``user``: a prize, or "no prize", recorded either way.

    The prize is chosen under the pool's strategy from the stock that strategy
    reads (see ``inventory.strategies``), and its award commits with its decrement, so
    nobody is told they won a prize that has just run out. A "no prize" draw
    counts against the limit like any other.

    Raises ``NotStarted``/``Ended`` outside the window, ``DrawLimit`` when the user
    has used every draw, ``PoolEmpty`` when no prize is left (nothing is counted),
    and ``LockBusy`` when the strategy gave up under contention. On any error
    nothing is written.

    The prizes' stock is read once, unguarded, before the take: once every prize
    reads zero the draw answers ``pool_empty`` without a strategy, and otherwise it
    is the take's snapshot for the strategies whose own read is unguarded.

    Under ``redis_lua`` the draw only reserves (``inventory.item_reserve``): it comes back
    pending, with its prize, and ``StateMissing`` (503) is raised while the pool's Redis
    state is missing.

    Arguments:
        rng: the source of randomness, ``secrets.SystemRandom`` unless a test
            passes a seeded ``random.Random``.
        rate: the request's rate limits (``core.ratelimit.rate_count``), counted on this
            pool first, in the reserving script's own round trip under ``redis_lua``:
            ``RateLimited`` (429) when over one.

    An unlisted pool (a load run's own) is open only to the load crowd
    (``accounts.crowd``): ``NotOpen`` for anyone else, who would skew its audit.
    """
    if not pool.listed and not crowd_member(user_id=user.pk):
        raise NotOpen()
    # The weighted choice's number, only when a reservation makes it: a non-redis_lua draw's
    # ``rng`` is the strategy's to use.
    rand = None if rng is None else lambda: rng.random()
    attempt = item_reserve(POOL, pool, user_id=user.pk, rate=rate, rand=rand)
    if attempt.record is not None:
        return attempt.record
    pool = attempt.item
    pool.window_check(now or timezone.now())
    used = 0

    def check() -> None:
        nonlocal used
        used = Draw.objects.filter(pool_id=pool.pk, user_id=user.pk).count()
        if used >= pool.draws_per_user:
            raise DrawLimit()

    def refuse_empty() -> NoReturn:
        check()  # a user with no draws left hears so, not pool_empty
        raise PoolEmpty()

    # After the last prize is won nearly every draw is refused: a pool read with its
    # stock summed (``pool_for_draw``) answers them without the prizes' rows.
    if getattr(pool, "stock_left", None) is not None and pool.stock_left <= 0:
        refuse_empty()
    # One query, a few small columns per prize, whatever the pool's size: the snapshot,
    # and the prize each stock row stands for (named, so that the answer needs no query).
    rows = Prize.objects.filter(pool_id=pool.pk).values_list("stock_id", "id", "name", "stock__quantity")
    prize_by_stock = {stock_id: (prize_id, name) for stock_id, prize_id, name, _ in rows}
    snapshot = {stock_id: quantity for stock_id, _, _, quantity in rows}

    if not any(quantity > 0 for quantity in snapshot.values()):
        refuse_empty()

    def record(stock_id: int | None, guarded: bool) -> Draw:
        prize = None
        if stock_id is not None:
            if stock_id not in prize_by_stock:  # a prize added since the snapshot
                prize_by_stock[stock_id] = Prize.objects.values_list("id", "name").get(stock_id=stock_id)
            prize_id, name = prize_by_stock[stock_id]
            # The prize as the snapshot read it (id and name): enough to announce it.
            prize = Prize(pk=prize_id, name=name, pool_id=pool.pk, stock_id=stock_id)
        draw = Draw.objects.create(
            user_id=user.pk,
            pool_id=pool.pk,
            prize=prize,
            status=Draw.Status.CONFIRMED,
            seq=used + 1,
            user_guard=user.pk if guarded else None,
        )
        draw.draws_counted = used + 1
        draw.draws_limit = pool.draws_per_user
        return draw

    take = Take(
        group_id=pool.group_id,
        choose=weighted_choice(no_prize_weight=pool.no_prize_weight, rng=rng or _system_random),
        user_key=f"pool:{pool.pk}:user:{user.pk}",
        check=check,
        record=record,
        snapshot=snapshot,
    )
    try:
        return stock_take(strategy=pool.strategy, take=take)
    except SoldOut as exc:
        raise PoolEmpty() from exc
    except IntegrityError as exc:
        if constraint_violated(exc, ONE_PER_SEQ) or constraint_violated(exc, ONE_PER_SEQ_SQLITE):
            raise DrawLimit() from exc
        raise
