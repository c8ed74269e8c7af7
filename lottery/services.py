"""Pools, prizes and the draw: window, per-user limit, and a prize chosen by remaining stock
under the pool's strategy."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from random import Random
from typing import TYPE_CHECKING, TypeVar, Unpack

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from core.errors import InvalidInput
from core.names import name_clean
from core.ratelimit import RateCount
from inventory.buckets import buckets_valid
from inventory.holds import hold_settle
from inventory.item_fields import item_changes_clean, item_changes_save, item_create, item_fields_clean
from inventory.redis_lua.item_states import item_update
from inventory.services import (
    stock_group_create,
    stock_group_rebucket,
    stock_shares,
    stock_shares_create,
    stock_shares_restock,
)
from inventory.take import item_take
from inventory.totals import over_recount
from inventory.validators import whole

from .models import Draw, Pool, Prize
from .product import POOL

if TYPE_CHECKING:
    from inventory.item_fields import ItemChanges, ItemFields

MAX_DRAWS_PER_USER = 1_000_000
MAX_NO_PRIZE_WEIGHT = 1_000_000_000
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
def pool_create(*, name: str, draws_per_user: int, no_prize_weight: int, **fields: Unpack[ItemFields]) -> Pool:
    """A pool with no prizes yet (add them with :func:`prize_create`), and the fields every item
    has (``inventory.item_fields``); ``listed=False`` keeps it out of the shop's lists (a load
    test's own). With ``buckets`` (1 to 64) each prize's units are spread over that many rows,
    one per bucket (docs/design.md, "Buckets")."""
    checked = item_fields_clean(**fields)
    return item_create(
        POOL,
        name=name_clean(name),
        draws_per_user=whole(draws_per_user, name="draws_per_user", minimum=1, maximum=MAX_DRAWS_PER_USER),
        no_prize_weight=whole(no_prize_weight, name="no_prize_weight", minimum=0, maximum=MAX_NO_PRIZE_WEIGHT),
        group=stock_group_create(),
        **checked,
    )


def pool_update(
    *,
    pool: Pool,
    draws_per_user: int | None = None,
    no_prize_weight: int | None = None,
    buckets: int | None = None,
    **changes: Unpack[ItemChanges],
) -> Pool:
    """Change a pool's limit or no-prize weight, split each prize's units left into another
    number of ``buckets`` (``inventory.services.stock_group_rebucket``: every prize keeps its
    units), and/or change the fields every item has (its window, strategy or description:
    ``inventory.item_fields``); all or nothing, with its ``redis_lua`` state in step (one
    state whatever the buckets, ``Product.routes_home``: built again from the database after
    the rows move, as a voucher's)."""
    checked = item_changes_clean(pool, **changes)
    if draws_per_user is not None:
        checked["draws_per_user"] = whole(draws_per_user, name="draws_per_user", minimum=1, maximum=MAX_DRAWS_PER_USER)
    if no_prize_weight is not None:
        checked["no_prize_weight"] = whole(
            no_prize_weight, name="no_prize_weight", minimum=0, maximum=MAX_NO_PRIZE_WEIGHT
        )
    rebucket = buckets is not None and buckets_valid(buckets) != pool.buckets
    if rebucket:
        checked["buckets"] = buckets

    def then() -> dict[int, int]:
        moved = stock_group_rebucket(group_id=pool.group_id, buckets=buckets) if rebucket else {}
        if "draws_per_user" in checked:
            # Who is over the limit depends on the limit: its running totals are counted again.
            over_recount(POOL, pool)
        return moved

    changed_more = rebucket or "draws_per_user" in checked
    item_changes_save(POOL, pool, checked, then=then if changed_more else None, rows_moved=rebucket)
    return pool


def _pool_change(pool: Pool, change: Callable[[], R], *, units: Callable[[R], dict[int, int]]) -> R:
    """``change()`` (database writes that commit), with the pool's Redis state in step
    (``inventory.redis_lua.item_states.item_update``); ``units(done)`` says the units added
    per stock row."""
    return item_update(POOL, pool, change, units=units)


def prize_create(*, pool: Pool, name: str, stock: int, description: str = "", value: Decimal | int | str = 0) -> Prize:
    """A prize of ``stock`` units: new rows of the pool's stock group, one per bucket of the
    pool, the units spread over them (``inventory.services.stock_shares_create``; and of its
    Redis state under ``redis_lua``)."""
    name = name_clean(name)
    amount = _value(value)

    @transaction.atomic
    def create() -> Prize:
        return Prize.objects.create(
            pool=pool,
            name=name,
            description=description,
            value=amount,
            stock=stock_shares_create(group=pool.group, units=stock, buckets=pool.buckets),
        )

    return _pool_change(pool, create, units=lambda prize: stock_shares(head_id=prize.stock_id))


def prize_update(
    *,
    prize: Prize,
    restock: int | None = None,
    name: str | None = None,
    description: str | None = None,
    value: Decimal | int | str | None = None,
) -> Prize:
    """Rename or revalue a prize and/or add units through the guarded restock, spread over its
    rows (one per bucket); all or nothing. Read it again (``lottery.selectors.prize_get``) to
    see its stock."""
    changes: dict[str, object] = {}
    if name is not None:
        changes["name"] = name_clean(name)
    if description is not None:
        changes["description"] = description
    if value is not None:
        changes["value"] = _value(value)

    @transaction.atomic
    def change() -> dict[int, int]:
        added = {}
        if restock is not None:
            # The stock rows before the prize's row, as a draw locks them (its record's foreign
            # key reads the prize's): the other order deadlocked with a draw of this prize.
            buckets = Pool.objects.values_list("buckets", flat=True).get(pk=prize.pool_id)  # as split now
            added = stock_shares_restock(head_id=prize.stock_id, quantity=restock, buckets=buckets)
        for field, new in changes.items():
            setattr(prize, field, new)
        if changes:
            prize.save(update_fields=list(changes))
        return added

    if restock is None:
        change()
    else:
        _pool_change(prize.pool, change, units=lambda added: added)
    return prize


def pool_draw(
    *,
    user: AbstractBaseUser,
    pool: Pool,
    rng: Random | None = None,
    now: datetime | None = None,
    rate: RateCount | None = None,
) -> Draw:
    """Draw once in ``pool`` for ``user``: a prize, or "no prize", recorded either way (under
    ``redis_lua`` reserved, and written later by a worker: pending). What a draw is, the
    pool's adapter says (``lottery.product``); the pool's strategy takes it
    (``inventory.take``).

    Raises ``NotStarted``/``Ended`` outside the window, ``DrawLimit`` when the user
    has used every draw, ``PoolEmpty`` when no prize is left (nothing is counted),
    ``LockBusy`` when the strategy gave up under contention, and ``StateMissing`` (503)
    while a ``redis_lua`` pool's Redis state is missing. On any error nothing is written.

    Arguments:
        rng: the source of randomness, ``secrets.SystemRandom`` unless a test
            passes a seeded ``random.Random``.
        rate: the request's rate limits (``core.ratelimit.rate_count``), counted on this
            pool first, in the reserving script's own round trip under ``redis_lua``:
            ``RateLimited`` (429) when over one.

    An unlisted pool (a load run's own) is open only to the load crowd: ``NotOpen`` for
    staff, ``Http404`` (as for an id of nothing) for anyone else.
    """
    return item_take(POOL, pool, user_id=user.pk, rate=rate, now=now, rng=rng)


def draw_claim(*, draw: Draw, now: datetime | None = None) -> Draw:
    """Claim a won prize before its ``claim_by`` (the caller's own draw, as ``draw_get`` read
    it: not read again). Past it, the prize is forfeited (back to the pool) and
    ``HoldForfeited`` (409) says so; ``already_claimed``, ``nothing_held`` (no prize) and
    ``pending`` likewise."""
    return hold_settle(POOL, draw, now=now)
