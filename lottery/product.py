"""The prize draw to the item core (``inventory.product``): a pool's prizes are the rows of its
stock group (one per prize, or per prize and bucket), drawn by weight with a weight of no
prize, a number of times per user; a bucketed pool's draw routes to a bucket by weight first
(``inventory.buckets.weighted_route``). Its record is a draw, numbered among the user's draws
(``seq``) under the limit's guard."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from random import Random
from typing import NoReturn

from django.db.models import Count, F, Max, QuerySet
from django.db.models.base import ModelState
from django.shortcuts import get_object_or_404
from django.utils import timezone

from accounts.crowd import crowd_member
from accounts.unlisted import unlisted_take_refuse
from core.memo import ProcessMemo
from inventory.buckets import weighted_route
from inventory.models import Stock
from inventory.product import Product
from inventory.redis_lua.values import Failed, Pending, Reserved, Rules, reservation_moment
from inventory.redis_lua.windows import hold_windows
from inventory.strategies.base import Take
from inventory.take import hold_until
from inventory.totals import stock_sums

from .errors import DrawLimit, NotOpen, PoolEmpty
from .models import Draw, Pool, Prize

# What a draw reads of its pool: the rules, not the texts.
_DRAW_FIELDS = (
    "id",
    "name",
    "begin_at",
    "end_at",
    "draws_per_user",
    "no_prize_weight",
    "strategy",
    "group_id",
    "listed",
    "hold_seconds",
    "buckets",
    "abandon_limit",
    "abandon_cooldown_seconds",
)


# The units left of a pool's prizes, summed in the query that reads the pool.
_STOCK_LEFT = stock_sums(Pool, "stock_left")


def pool_for_draw(*, pool_id: int) -> Pool:
    """The pool with ``stock_left``, its prizes' stock summed in the same query
    (``inventory.totals.stock_sums``): once that reads zero the draw answers ``pool_empty``
    without reading the prizes one by one."""
    return get_object_or_404(Pool.objects.only(*_DRAW_FIELDS).annotate(**_STOCK_LEFT), pk=pool_id)


@dataclass(frozen=True)
class PrizeNamed:
    """What a draw announces of a prize, as kept between draws: a value nobody can change."""

    id: int
    name: str
    stock_id: int


# Prizes by any of their stock rows.
_prizes: ProcessMemo[int, PrizeNamed] = ProcessMemo(ttl=5.0)


def prizes_of_rows(**rows) -> QuerySet[Prize]:
    """The prizes of the stock rows that ``rows`` filter (``id=``, ``id__in=``, ``group_id=``):
    a prize's rows, one per bucket, share its head row (``Prize.stock``, ``Stock.head``), so
    any of them leads to it. Each prize is read once per row, with ``row_id`` its row."""
    shares = {f"stock__shares__{name}": value for name, value in rows.items()}
    return Prize.objects.filter(**shares).annotate(row_id=F("stock__shares__id"))


def prize_for_stock(*, stock_id: int) -> Prize:
    """The prize of a stock row (any of its buckets'), its id and name only (enough to
    announce it), read once per five seconds in this process: every ``redis_lua`` draw
    announces one. What is kept is a frozen ``PrizeNamed``; each call answers a ``Prize`` of
    its own, so that what one draw does with it reaches no other."""
    named = _prizes.get(stock_id)
    if named is None:
        prize_id, name, head_id = prizes_of_rows(id=stock_id).values_list("id", "name", "stock_id").get()
        named = PrizeNamed(id=prize_id, name=name, stock_id=head_id)
        _prizes.put(stock_id, named)
    return _prize_of(named)


def _prize_of(named: PrizeNamed) -> Prize:
    # A row's instance as Model.from_db makes one, the other fields deferred, without
    # __init__'s work per field (none of these three needs it): about 4 us a draw, where
    # Prize(...) costs 50, as much as the rest of the draw's Python.
    prize = Prize.__new__(Prize)
    prize.__dict__.update(id=named.id, name=named.name, stock_id=named.stock_id, _state=ModelState())
    prize._state.adding = False
    return prize


_system_random = secrets.SystemRandom()


def weighted_choice(*, no_prize_weight: int, rng: Random, scale: int = 1) -> Callable[[Mapping[int, int]], int | None]:
    """A chooser that picks stock row i with probability
    ``remaining_i / (sum + no_prize_weight / scale)``, and nothing with the rest.

    Integer arithmetic only: one ticket is drawn uniformly from
    ``scale * sum + no_prize_weight`` and walks the rows in id order, each weighing
    ``scale * remaining_i``, so the odds are exact whatever the numbers. ``scale`` is a
    bucketed pool's number of buckets: each bucket carries ``no_prize_weight / buckets`` of
    no prize (``inventory.buckets.weighted_route``), and scaling every weight by it keeps
    that share whole. A bucket with no stock then draws no prize.
    """

    def choose(remaining: Mapping[int, int]) -> int | None:
        ticket = rng.randrange(scale * sum(remaining.values()) + no_prize_weight)
        for stock_id in sorted(remaining):
            if ticket < scale * remaining[stock_id]:
                return stock_id
            ticket -= scale * remaining[stock_id]
        return None

    return choose


class PoolProduct(Product):
    kind = "pool"
    item_model = Pool
    record_model = Draw
    item_field = "pool"
    group_field = "group_id"
    over_limit = DrawLimit
    sold_out = PoolEmpty
    # The limit's key: one draw per number per user; SQLite names its columns instead.
    backstop = ("draw_one_per_seq", "lottery_draw.pool_id, lottery_draw.user_guard, lottery_draw.seq")
    # A forfeited draw still counts against the user's draws: its release clears nothing.
    settled, lapsed, unit_field = Draw.Status.CLAIMED, Draw.Status.FORFEITED, "stock_id"
    # A bucketed pool's draw routes by weight (its take's ``route``), not to a home bucket.
    routes_home = False

    def take(
        self,
        pool: Pool,
        *,
        user_id: int,
        now: datetime | None,
        rng: Random | None,
        hold_until: datetime | None,
        **carried,
    ) -> Take[Draw]:
        """A draw: the prize chosen by weight (``weighted_choice``) from the stock the strategy
        reads, awarded in the transaction of its decrement, so nobody is told they won a prize
        that has just run out. A "no prize" draw counts against the limit like any other.

        The prizes' stock is read once, unguarded, before the take (``admit``): once every
        prize reads zero the draw answers ``pool_empty`` without a strategy, and otherwise it
        is the snapshot of the strategies whose own read is unguarded.

        An unlisted pool (a load run's own) is open only to the load crowd
        (``accounts.crowd``): anyone else would skew its audit. Staff hear ``NotOpen``; others,
        who may not see the pool at all, what an id of nothing answers (``accounts.unlisted``)."""
        if not pool.listed and not crowd_member(user_id=user_id):
            unlisted_take_refuse(user_id=user_id, refusal=NotOpen())
        used = top = 0
        prize_by_stock: dict[int, tuple[int, str, int]] = {}
        by_bucket: dict[int, int] = {}

        def check() -> None:
            nonlocal used, top
            counted = self.taking_of(pool.pk, user_id).aggregate(n=Count("pk"), top=Max("seq"))
            used, top = counted["n"], counted["top"] or 0
            if used >= pool.draws_per_user:
                raise DrawLimit()

        def refuse_empty() -> NoReturn:
            check()  # a user with no draws left hears so, not pool_empty
            raise PoolEmpty()

        def window_check() -> None:
            pool.window_check(now or timezone.now())

        def admit() -> dict[int, int]:
            window_check()
            # After the last prize is won nearly every draw is refused: a pool read with its
            # stock summed (``pool_for_draw``) answers them without the prizes' rows.
            if getattr(pool, "stock_left", None) is not None and pool.stock_left <= 0:
                refuse_empty()
            # One query, a few small columns per stock row (a prize's, one per bucket), whatever
            # the pool's size: the snapshot, the units of each bucket (the first route's), and
            # the prize each row stands for (named, so that the answer needs no query).
            rows = Stock.objects.filter(group_id=pool.group_id).values_list(
                "id", "bucket", "quantity", "head__prize__id", "head__prize__name", "head_id"
            )
            snapshot: dict[int, int] = {}
            for stock_id, bucket, quantity, prize_id, name, head_id in rows:
                prize_by_stock[stock_id] = (prize_id, name, head_id)
                snapshot[stock_id] = quantity
                by_bucket[bucket] = by_bucket.get(bucket, 0) + max(quantity, 0)
            if not any(quantity > 0 for quantity in snapshot.values()):
                refuse_empty()
            return snapshot

        def record(stock_id: int | None, guarded: bool) -> Draw:
            prize = None
            if stock_id is not None:
                if stock_id not in prize_by_stock:  # a prize added since the snapshot
                    prize_by_stock[stock_id] = prizes_of_rows(id=stock_id).values_list("id", "name", "stock_id").get()
                prize_id, name, head_id = prize_by_stock[stock_id]
                # The prize as the snapshot read it (id and name): enough to announce it.
                prize = Prize(pk=prize_id, name=name, pool_id=pool.pk, stock_id=head_id)
            draw = Draw.objects.create(
                user_id=user_id,
                pool_id=pool.pk,
                prize=prize,
                stock_id=stock_id,
                # A prize won is held for its claim; no prize is settled at once.
                status=Draw.Status.HELD if hold_until and prize else Draw.Status.CONFIRMED,
                hold_until=hold_until if prize else None,
                # Above every number the user holds, not their count plus one: a gap (a
                # ``redis_lua`` reservation undone frees its number) put that on a number in use,
                # and every draw after it clashed on the backstop. Draws checked at once still
                # read the same top, and carry the same number.
                seq=top + 1,
                user_guard=user_id if guarded else None,
            )
            draw.draws_counted = used + 1
            draw.draws_limit = pool.draws_per_user
            return draw

        rng = rng or _system_random
        route = None
        if pool.buckets > 1:
            # A bucketed pool (docs/design.md, "Buckets"): the bucket by weight, each bucket with
            # its share of no prize, then the prize within it; every weight scaled by the
            # buckets. Its first try reads the units per bucket that ``admit`` read before it.
            route = weighted_route(
                group_id=pool.group_id,
                buckets=pool.buckets,
                nothing_weight=pool.no_prize_weight,
                rng=rng,
                first=by_bucket,
            )
        return Take(
            group_id=pool.group_id,
            choose=weighted_choice(no_prize_weight=pool.no_prize_weight, rng=rng, scale=pool.buckets),
            check=check,
            record=record,
            admit=admit,
            window_check=window_check,
            user_id=user_id,
            buckets=pool.buckets,
            route=route,
            choose_empty=pool.no_prize_weight > 0,
            **carried,
        )

    def read(self, item_id: int) -> Pool:
        return pool_for_draw(pool_id=item_id)

    def rules(self, item: Pool) -> Rules:
        return Rules(
            begin_at=item.begin_at,
            end_at=item.end_at,
            limit=item.draws_per_user,
            no_take=item.no_prize_weight,
            abandon_limit=item.abandon_limit,
            abandon_cooldown=item.abandon_cooldown_seconds,
            hold_seconds=item.hold_seconds,
        )

    def takes(self, records: QuerySet) -> tuple[dict[int, int], list[tuple[int, int]]]:
        """A draw keeps its number (``seq``): each user's draws are counted from them. In no
        order: the records' default (newest first) would sort every draw of the pool."""
        seqs = list(records.order_by().values_list("user_id", "seq"))
        return dict(Counter(user_id for user_id, _ in seqs)), seqs

    def rows(self, item_id: int, fresh: list[Pending]) -> list[Draw]:
        # Any row of a prize (one per bucket) is the prize's.
        prize_of = dict(prizes_of_rows(id__in={one.stock_id for one in fresh}).values_list("row_id", "id"))
        windows = hold_windows(fresh, lambda: Pool.objects.values_list("hold_seconds", flat=True).get(pk=item_id))
        return [
            Draw(
                user_id=one.user_id,
                pool_id=item_id,
                prize_id=None if one.stock_id is None else prize_of[one.stock_id],
                stock_id=one.stock_id,
                status=Draw.Status.HELD if window and one.stock_id else Draw.Status.CONFIRMED,
                hold_until=hold_until(window, reservation_moment(one)) if one.stock_id else None,
                # The script's count of the user's takes: with user_guard, the limit's backstop.
                seq=one.seq,
                user_guard=one.user_id,
                reservation=one.reservation_id,
            )
            for one, window in zip(fresh, windows, strict=True)
        ]

    def reserved(self, item: Pool, user_id: int, reserved: Reserved) -> Draw:
        """The draw as it will be, with the prize as it will award it (its name kept a few
        seconds per process)."""
        prize = None if reserved.stock_id is None else prize_for_stock(stock_id=reserved.stock_id)
        draw = Draw(
            user_id=user_id,
            pool_id=item.pk,
            prize=prize,
            stock_id=reserved.stock_id,
            status=Draw.Status.PENDING,
            seq=reserved.seq,
            reservation=reserved.reservation_id,
        )
        draw.draws_counted = reserved.takes
        # The limit the script enforced, from Redis: the pool may be a memo up to a second
        # older than a change of it.
        draw.draws_limit = reserved.limit
        return draw

    def unsaved(self, found: Pending | Failed, item: Pool, **fields) -> Draw:
        prize = None if found.stock_id is None else prizes_of_rows(id=found.stock_id).first()
        return Draw(
            user_id=found.user_id,
            pool=item,
            prize=prize,
            stock_id=found.stock_id,
            seq=getattr(found, "seq", 0),
            reservation=found.reservation_id,
            **fields,
        )


POOL = PoolProduct()
