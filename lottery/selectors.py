"""Reads of pools, prizes and draws, the odds, and the audit of a pool's invariants
(docs/design.md, "Invariants")."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, F, Prefetch, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from accounts.unlisted import item_shown
from inventory.audits import Audit, HoldCounts, record_totals
from inventory.items import items_live, items_shown, record_get, records_of_user, reservation_takes
from inventory.models import Stock, Strategy
from inventory.paging import PAGE_SIZE, Cursor, Page
from inventory.product import product_of
from inventory.records import SETTLED, TAKING
from inventory.totals import ItemMarks, StockMarks, stock_sums

from .models import Draw, Pool, Prize


def pool_list() -> QuerySet[Pool]:
    """The pools on show (not the race lab's own, nor those ended more than a day ago:
    ``inventory.items.items_shown``), by when they begin."""
    return items_shown(Pool.objects.all()).order_by("begin_at", "id")


# A prize's stock: its rows (one per bucket: the rows sharing its head, ``Stock.head``) summed.
_PRIZE_STOCK = stock_sums(Prize, group="stock_id", key="head_id")


def prizes_stocked(prizes: QuerySet[Prize]) -> QuerySet[Prize]:
    """``prizes``, each with its stock summed over its rows in the query that reads it
    (``stock_left``, ``stock_supplied``, ``stock_taken``): the one read of a prize's stock,
    behind the pages, the API, the admin and the odds. Only the audits read rows apart."""
    return prizes.annotate(**_PRIZE_STOCK)


def prize_marks(prize: Prize) -> StockMarks:
    """What a prize's stock says, as ``prizes_stocked`` read it."""
    return StockMarks.summed(prize)


def pool_get(*, pool_id: int) -> Pool:
    """The pool with its prizes and their stock; raises ``Http404`` when there is none."""
    prizes = Prefetch("prizes", queryset=prizes_stocked(Prize.objects.order_by("id")))
    return get_object_or_404(Pool.objects.select_related("group").prefetch_related(prizes), pk=pool_id)


def pool_shown(*, pool_id: int, user) -> Pool:
    """The pool as :func:`pool_get` reads it, for ``user`` to see: an unlisted one (a load run's
    own) is as missing (``Http404``) to all but staff and the load crowd (``accounts.unlisted``)."""
    return item_shown(pool_get(pool_id=pool_id), user=user)


def prize_get(*, prize_id: int) -> Prize:
    """The prize with its stock (``prizes_stocked``) and its pool; ``Http404`` when there is none."""
    return get_object_or_404(prizes_stocked(Prize.objects.select_related("pool")), pk=prize_id)


@dataclass(frozen=True)
class Odds:
    """Each prize's probability now, and that of "no prize"; all 0 once the pool is empty
    (a draw then answers ``pool_empty``)."""

    by_prize: dict[int, float]
    no_prize: float

    @property
    def empty(self) -> bool:
        return not any(self.by_prize.values())


def pool_odds(*, pool: Pool) -> Odds:
    """``stock_i / (sum of stock + no_prize_weight)`` from the prizes as read with the pool
    (``pool_get``: each prize's stock summed over its buckets)."""
    prizes = list(pool.prizes.all())
    stock = sum(max(prize.stock_left, 0) for prize in prizes)
    if stock == 0:
        return Odds(by_prize=dict.fromkeys((prize.pk for prize in prizes), 0.0), no_prize=0.0)
    total = stock + pool.no_prize_weight
    return Odds(
        by_prize={prize.pk: max(prize.stock_left, 0) / total for prize in prizes},
        no_prize=pool.no_prize_weight / total,
    )


def pools_with_reservations() -> QuerySet[Pool]:
    """The ``redis_lua`` pools whose draw has not ended: those with a live Redis state."""
    return items_live(product_of("pool"))


def draws_used(*, pool: Pool, user) -> int:
    """The user's draws in the pool: under ``redis_lua`` the pending ones count too, as the
    state's count of the user's takes has them (one HGET, not the stream: pages poll this);
    with no state the rows alone."""
    recorded = product_of("pool").counted(pool.pk, user.pk)
    if pool.strategy != Strategy.REDIS_LUA:
        return recorded
    return max(recorded, reservation_takes(group_id=pool.group_id, user_id=user.pk))


def draw_list(*, user, pool: Pool | None = None) -> QuerySet[Draw]:
    """The user's draws that are rows (in ``pool`` only, if given), newest first."""
    draws = Draw.objects.filter(user_id=user.pk)
    if pool is not None:
        draws = draws.filter(pool_id=pool.pk)
    return draws.select_related("prize", "pool").order_by("-created_at", "-id")


def draw_page(
    *, user, pool: Pool | None = None, after: Cursor | None = None, size: int | None = PAGE_SIZE, reserved: bool = True
) -> Page[Draw]:
    """A page of the user's draws (in ``pool`` only, if given), newest first
    (``inventory.paging``): the rows, and with ``reserved``, under ``redis_lua``, those still
    pending or failed, read from Redis (unsaved draws with their reservation's id). The page's
    pools and prizes come in one read each."""
    pools = pools_with_reservations()
    if pool is not None:
        pools = pools.filter(pk=pool.pk)
    # Not joined: with the pools in the query, MariaDB may start from the (small) pool table and
    # sort every draw of the user, where alone it reads the page from the index.
    rows = draw_list(user=user, pool=pool).select_related(None).prefetch_related("pool", "prize")
    return records_of_user(
        product_of("pool"),
        user_id=user.pk,
        rows=rows,
        items=pools,
        after=after,
        size=size,
        reserved=reserved,
    )


def draw_get(*, user, draw_id: int) -> Draw:
    """The caller's own draw by the id they know it by (``Draw.public_id``); another user's
    draw is as good as missing (``Http404``)."""
    return record_get(product_of("pool"), record_id=draw_id, user_id=user.pk, rows=draw_list(user=user))


@dataclass(frozen=True)
class PrizeAudit:
    prize_id: int
    name: str
    supplied: int
    stock: int
    awarded: int
    over_awarded: int
    conserved: bool


@dataclass(frozen=True)
class PoolAudit(Audit):
    pool_id: int
    name: str
    strategy: str
    draws_per_user: int
    supplied: int
    stock: int
    awarded: int
    no_prize_draws: int
    draws: int
    pending: int
    users: int
    over_awarded: int
    users_over_limit: int
    draws_over_limit: int
    conserved: bool
    stock_not_negative: bool
    prizes: list[PrizeAudit] = field(default_factory=list)
    # Draws whose prize is held for its claim, claimed (prizes alone: a draw of no prize holds
    # no unit), forfeited (the prize back in the pool).
    holds: HoldCounts = HoldCounts()
    # Whether the running totals the pages read (inventory.totals) say what the draws say.
    totals_agree: bool = True

    @property
    def ok(self) -> bool:
        return (
            self.over_awarded == 0
            and self.users_over_limit == 0
            and self.conserved
            and self.stock_not_negative
            and self.holds.ok
            and self.totals_agree
        )


def pool_audit(*, pool_id: int) -> PoolAudit:
    """The invariants of one pool, read from the database as it is now.

    Per stock row (a prize has one per bucket), ``supplied`` is its initial stock plus every
    restock: the draws holding a unit of it must not exceed it and ``stock + awarded`` must
    equal it; per prize, its draws must be those its rows count. ``users_over_limit``
    counts users with more draws recorded than the pool allows (``draws_over_limit`` the
    draws beyond it).
    """
    pool = Pool.objects.select_related("group").get(pk=pool_id)
    prizes = list(_prizes_awarded().filter(pool_id=pool_id))
    rows = list(_rows_awarded().filter(group_id=pool.group_id))
    totals = Draw.objects.filter(pool_id=pool_id).aggregate(**_DRAW_TOTALS)
    per_user = product_of("pool").taking(Draw.objects.filter(pool_id=pool_id)).values("user_id").annotate(n=Count("id"))
    over = [row["n"] - pool.draws_per_user for row in per_user.filter(n__gt=pool.draws_per_user)]
    return _pool_audit(pool, prizes, rows, totals, over)


# Draws that hold the unit they took (held or claimed: a forfeited prize went back to the pool).
_HOLDING = Q(draws__status__in=TAKING)


def _prizes_awarded() -> QuerySet[Prize]:
    """Prizes with ``awarded``: the draws that won the prize and hold it."""
    return Prize.objects.annotate(awarded=Count("draws", filter=_HOLDING)).order_by("id")


def _rows_awarded() -> QuerySet[Stock]:
    """Stock rows with ``awarded``: the draws that took a unit of the row (``Draw.stock``)
    and hold it."""
    return Stock.objects.annotate(awarded=Count("draws", filter=_HOLDING)).order_by("id")


# A pool's draws counted for its audit.
_DRAW_TOTALS = {
    **record_totals(),
    # Claimed: prizes. A draw of no prize is settled when drawn but holds no unit, so that
    # counting it would read "claimed 5" beside "awarded 3".
    "settled": Count("id", filter=Q(status__in=SETTLED, prize__isnull=False)),
    "no_prize": Count("id", filter=Q(prize__isnull=True)),
    "users": Count("user_id", distinct=True),
}


def _prize_audit(prize: Prize, rows: list[Stock]) -> PrizeAudit:
    """A prize's audit from its rows (one per bucket, ``_rows_awarded``): each row's units
    conserved, and the prize's draws (``_prizes_awarded``) the sum of its rows' draws."""
    return PrizeAudit(
        prize_id=prize.pk,
        name=prize.name,
        supplied=sum(row.initial_quantity for row in rows),
        stock=sum(row.quantity for row in rows),
        awarded=prize.awarded,
        over_awarded=sum(max(0, row.awarded - row.initial_quantity) for row in rows),
        conserved=all(row.quantity + row.awarded == row.initial_quantity for row in rows)
        and prize.awarded == sum(row.awarded for row in rows),
    )


def _pool_audit(
    pool: Pool, prizes: list[Prize], rows: list[Stock], totals: dict[str, int], over: list[int]
) -> PoolAudit:
    """The audit from the counts: ``prizes`` from ``_prizes_awarded``, ``rows`` (the pool's
    stock rows) from ``_rows_awarded``, ``totals`` as ``_DRAW_TOTALS`` counts them, and
    ``over`` the draws beyond the limit of each user who has gone over it; ``pool`` read
    with its group."""
    shares: dict[int | None, list[Stock]] = defaultdict(list)
    for row in rows:
        shares[row.head_id].append(row)
    per_prize = [_prize_audit(prize, shares[prize.stock_id]) for prize in prizes]
    return PoolAudit(
        pool_id=pool.pk,
        name=pool.name,
        strategy=pool.strategy,
        draws_per_user=pool.draws_per_user,
        supplied=sum(p.supplied for p in per_prize),
        stock=sum(p.stock for p in per_prize),
        awarded=sum(p.awarded for p in per_prize),
        no_prize_draws=totals["no_prize"],
        draws=totals["records"],
        pending=totals["pending"],
        users=totals["users"],
        over_awarded=sum(p.over_awarded for p in per_prize),
        users_over_limit=len(over),
        draws_over_limit=sum(over),
        conserved=all(p.conserved for p in per_prize),
        stock_not_negative=all(row.quantity >= 0 for row in rows),
        prizes=per_prize,
        holds=HoldCounts.of(totals),
        totals_agree=all(row.taken == row.awarded for row in rows)
        and (pool.group.over_takes, pool.group.over_takers) == (sum(over), len(over)),
    )


def pool_list_marked() -> list[Pool]:
    """The pools of ``pool_list``, each with ``marks``: what its running totals say
    (``inventory.totals``), its prizes left and supplied among them.

    Two queries whatever the pools' draws: the pools with their groups, then their prizes'
    stock rows. The list page polls this every few seconds per open tab: it counts no draw."""
    pools = list(pool_list().select_related("group"))
    stocks: dict[int, list[Stock]] = defaultdict(list)
    for stock in Stock.objects.filter(group_id__in=[pool.group_id for pool in pools]).order_by("pk"):
        stocks[stock.group_id].append(stock)
    for pool in pools:
        pool.marks = ItemMarks.of(stocks[pool.group_id], pool.group)
    return pools


def pool_audits(*, pool_ids: list[int]) -> list[PoolAudit]:
    """``pool_audit`` of each pool of ``pool_ids``, in that order, in five queries whatever
    their number (``manage.py audit``)."""
    pools = Pool.objects.select_related("group").in_bulk(pool_ids)
    audits = _pool_audits(list(pools.values()))
    return [audits[pool_id] for pool_id in pool_ids]


def _pool_audits(pools: list[Pool]) -> dict[int, PoolAudit]:
    """The audits of ``pools`` by id: the pools given, then their prizes, stock rows, draw
    totals and users over the limit, each counted for every pool at once."""
    ids = [pool.pk for pool in pools]
    prizes: dict[int, list[Prize]] = defaultdict(list)
    for prize in _prizes_awarded().filter(pool_id__in=ids):
        prizes[prize.pool_id].append(prize)
    rows: dict[int, list[Stock]] = defaultdict(list)
    for row in _rows_awarded().filter(group_id__in=[pool.group_id for pool in pools]):
        rows[row.group_id].append(row)
    totals: dict[int, dict[str, int]] = {}
    for row in Draw.objects.filter(pool_id__in=ids).order_by().values("pool_id").annotate(**_DRAW_TOTALS):
        totals[row.pop("pool_id")] = row
    over: dict[int, list[int]] = defaultdict(list)
    per_user = (
        product_of("pool")
        .taking(Draw.objects.filter(pool_id__in=ids))
        .order_by()
        .values("pool_id", "user_id", "pool__draws_per_user")
        .annotate(n=Count("id"))
        .filter(n__gt=F("pool__draws_per_user"))
    )
    for row in per_user:
        over[row["pool_id"]].append(row["n"] - row["pool__draws_per_user"])
    no_draws = dict.fromkeys(_DRAW_TOTALS, 0)
    return {
        pool.pk: _pool_audit(pool, prizes[pool.pk], rows[pool.group_id], totals.get(pool.pk, no_draws), over[pool.pk])
        for pool in pools
    }


def pool_marks(*, pool: Pool) -> ItemMarks:
    """What the pool's running totals say, from its prizes as ``pool_get`` read them."""
    rows = tuple(prize_marks(prize) for prize in pool.prizes.all())
    return ItemMarks(rows=rows, over_takes=pool.group.over_takes, over_takers=pool.group.over_takers)


def pool_draw_refusal(*, pool: Pool, draws_left: int | None, empty: bool, now: datetime | None = None) -> str | None:
    """The code of the refusal a draw would get now (``lottery.services.pool_draw``), or
    ``None`` when it may draw: what the page disables the Draw button for, and says.

    ``draws_left`` is ``None`` for an anonymous visitor; ``empty`` says every prize
    read as won. The user's own last draw comes first, as the reason that lasts; then
    the window; then the stock. A guess from a read, never a decision: the service
    decides under the pool's strategy.
    """
    if draws_left == 0:
        return "draw_limit"
    refusal = pool.window_refusal(now or timezone.now())
    if refusal is not None:
        return refusal
    if empty:
        return "pool_empty"
    return None
