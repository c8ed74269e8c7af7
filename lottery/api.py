"""The prize draw's JSON API: pools, the draw, the caller's draws and their claim, and the
staff's pool calls."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.http import HttpResponse
from ninja import Query, Router, Schema, Status
from pydantic import Field

from accounts.auth import optional_auth, require_permission
from accounts.unlisted import item_shown
from core.api import staff_read, staff_write
from core.metrics import draw_counted
from core.schemas import InputSchema, Money, UtcDatetime, answers, text, whole
from inventory.admission.api import AdmissionIn, AdmissionOut, AdmissionPatchIn, QueueCall, queue_answers
from inventory.api import (
    ABANDON_COOLDOWN_SAID,
    ABANDON_LIMIT_SAID,
    AbandonCooldown,
    AbandonLimit,
    ChangeCall,
    HoldCountsOut,
    HoldWindow,
    PageIn,
    TakeCall,
    change_answers,
    hold_window,
    keyed_openapi,
    page_answer,
    paged_openapi,
    take_answers,
)
from inventory.models import Strategy
from inventory.records import DEFAULT_ABANDON_COOLDOWN_SECONDS, DEFAULT_ABANDON_LIMIT, MAX_BUCKETS
from inventory.services import MAX_UNITS

from . import links
from .models import Draw, Pool, Prize
from .product import POOL
from .selectors import (
    draw_get,
    draw_page,
    draws_used,
    pool_audit,
    pool_get,
    pool_list,
    pool_odds,
    pool_shown,
    prize_get,
)
from .services import (
    MAX_DRAWS_PER_USER,
    MAX_NO_PRIZE_WEIGHT,
    draw_claim,
    pool_create,
    pool_update,
    prize_create,
    prize_update,
)

router = Router(tags=["pools"])


class PoolSummaryOut(AdmissionOut):
    id: int
    name: str
    begin_at: datetime
    end_at: datetime
    draws_per_user: int
    strategy: str
    state: str

    @staticmethod
    def resolve_state(obj: Pool) -> str:
        return obj.window_state()


class PrizeOut(Schema):
    id: int
    name: str
    description: str
    value: Decimal
    stock: int
    initial_stock: int
    probability: float = Field(ge=0, le=1, description="stock / (sum of stock + no_prize_weight), now")


class PoolOut(AdmissionOut):
    id: int
    name: str
    description: str
    begin_at: datetime
    end_at: datetime
    draws_per_user: int
    no_prize_weight: int
    strategy: str
    state: str
    claim_window_seconds: int = Field(description="how long a prize won is held for its claim; 0: claimed when won")
    buckets: int = Field(description="how many stock rows each prize's units are spread over (1-64)")
    abandon_limit: int = Field(description=ABANDON_LIMIT_SAID)
    abandon_cooldown_seconds: int = Field(description=ABANDON_COOLDOWN_SAID)
    no_prize_probability: float = Field(ge=0, le=1)
    prizes: list[PrizeOut]
    draws_left: int | None = Field(default=None, description="for an authenticated caller only")


class PrizeRef(Schema):
    id: int
    name: str


class DrawOut(Schema):
    draw_id: int
    status: str = Field(description="confirmed, or held until claim_by (201); pending under redis_lua (202)")
    prize: PrizeRef | None
    draws_left: int
    claim_by: datetime | None = Field(description="when a prize held is forfeited unless claimed; null when none")


class DrawListOut(Schema):
    draw_id: int = Field(
        description="the id the draw answered, from a redis_lua 202 on; it tells nothing of other draws"
    )
    pool_id: int
    prize: PrizeRef | None
    status: str = Field(description="confirmed; held then claimed or forfeited; redis_lua: pending, or failed")
    reason: str = Field(description="why a failed draw failed; empty otherwise")
    created_at: datetime
    claim_by: datetime | None = Field(description="the deadline of a held prize's claim; null without one")


class ClaimOut(Schema):
    draw_id: int
    status: str = Field(description="claimed: the prize is the winner's")


class PrizeAuditOut(Schema):
    prize_id: int
    name: str
    supplied: int
    stock: int
    awarded: int
    over_awarded: int
    conserved: bool


class PoolAuditOut(Schema):
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
    prizes: list[PrizeAuditOut]
    holds: HoldCountsOut = Field(description="draws whose prize is held, claimed (or drawn with none), forfeited")
    totals_agree: bool = Field(description="the running totals the pages show agree with the draws")
    ok: bool


class PoolCreateIn(AdmissionIn):
    name: text(200)
    description: str = Field(default="", max_length=10_000)
    begin_at: UtcDatetime
    end_at: UtcDatetime
    draws_per_user: whole(1, MAX_DRAWS_PER_USER)
    no_prize_weight: whole(0, MAX_NO_PRIZE_WEIGHT)
    strategy: Strategy = Field(default_factory=lambda: Strategy(settings.DEFAULT_STRATEGY))
    claim_window_seconds: HoldWindow = 0
    buckets: whole(1, MAX_BUCKETS) = 1
    abandon_limit: AbandonLimit = DEFAULT_ABANDON_LIMIT
    abandon_cooldown_seconds: AbandonCooldown = DEFAULT_ABANDON_COOLDOWN_SECONDS


class PoolPatchIn(AdmissionPatchIn):
    strategy: Strategy | None = None
    begin_at: UtcDatetime | None = None
    end_at: UtcDatetime | None = None
    draws_per_user: whole(1, MAX_DRAWS_PER_USER) | None = None
    no_prize_weight: whole(0, MAX_NO_PRIZE_WEIGHT) | None = None
    claim_window_seconds: HoldWindow | None = None
    buckets: whole(1, MAX_BUCKETS) | None = None
    abandon_limit: AbandonLimit | None = None
    abandon_cooldown_seconds: AbandonCooldown | None = None


class PrizeCreateIn(InputSchema):
    name: text(200)
    stock: whole(0, MAX_UNITS)
    description: str = Field(default="", max_length=10_000)
    value: Money = Decimal(0)


class PrizePatchIn(InputSchema):
    restock: whole(1, MAX_UNITS) | None = None
    name: text(200) | None = None
    description: str | None = Field(default=None, max_length=10_000)
    value: Money | None = None


def _prize_out(prize: Prize, probability: float) -> dict:
    return {
        "id": prize.pk,
        "name": prize.name,
        "description": prize.description,
        "value": prize.value,
        # Summed over the prize's rows, one per bucket (``lottery.selectors.prizes_stocked``).
        "stock": prize.stock_left,
        "initial_stock": prize.stock_supplied,
        "probability": probability,
    }


def _pool_out(pool: Pool, user=None) -> dict:
    odds = pool_odds(pool=pool)
    return {
        "id": pool.pk,
        "name": pool.name,
        "description": pool.description,
        "begin_at": pool.begin_at,
        "end_at": pool.end_at,
        "draws_per_user": pool.draws_per_user,
        "no_prize_weight": pool.no_prize_weight,
        "strategy": pool.strategy,
        "state": pool.window_state(),
        "claim_window_seconds": pool.hold_seconds,
        "buckets": pool.buckets,
        "admission": pool.admission,
        "admission_rate": pool.admission_rate,
        "admission_ticket_seconds": pool.admission_ticket_seconds,
        "abandon_limit": pool.abandon_limit,
        "abandon_cooldown_seconds": pool.abandon_cooldown_seconds,
        "no_prize_probability": odds.no_prize,
        "prizes": [_prize_out(prize, odds.by_prize[prize.pk]) for prize in pool.prizes.all()],
        "draws_left": (
            max(0, pool.draws_per_user - draws_used(pool=pool, user=user))
            if user is not None and user.is_authenticated
            else None
        ),
    }


def _prize_ref(prize: Prize | None) -> dict | None:
    return None if prize is None else {"id": prize.pk, "name": prize.name}


@router.get(
    "/pools", response=answers({200: list[PoolSummaryOut]}, login=False), auth=None, openapi_extra=links.POOL_LIST
)
def pools_list(request):
    return list(pool_list())


@router.get(
    "/pools/{int:pool_id}",
    response=answers({200: PoolOut}, login=False, item=True),
    auth=optional_auth,
    # Anyone may read a pool: a login is optional (it adds draws_left), which {} says.
    openapi_extra={"security": [{}], **links.POOL_SHOWN},
)
def pools_get(request, pool_id: int):
    return _pool_out(pool_shown(pool_id=pool_id, user=request.auth), request.auth)


DRAW = TakeCall(action="draw", product=POOL, counted=draw_counted)


def _drawn(draw: Draw) -> dict:
    return {
        "draw_id": draw.public_id,
        "status": draw.status,
        "prize": _prize_ref(draw.prize),
        "draws_left": max(0, draw.draws_limit - draw.draws_counted),
        "claim_by": draw.hold_until,
    }


# 403 not_started or ended; 409 draw_limit, pool_empty, abandon_limit, busy or
# idempotency_in_progress/interrupted; 422 an Idempotency-Key malformed or reused; 429 rate_limited or
# cooling_down.
@router.post(
    "/pools/{int:pool_id}/draw", response=take_answers(DrawOut), openapi_extra=keyed_openapi(links.DRAWN, take=True)
)
def pools_draw(request, pool_id: int, response: HttpResponse):
    return DRAW.answer(request, response, pool_id, _drawn)


QUEUE = QueueCall(product=POOL, shown=item_shown)


@router.post("/pools/{int:pool_id}/queue", response=queue_answers(join=True), tags=["waiting room"])
def pools_queue_join(request, response: HttpResponse, pool_id: int):
    """Join the pool's waiting room, once (joining again answers where the caller stands): on a pool
    whose admission is `queue`, each draw needs a ticket the room gives once the caller is admitted."""
    return QUEUE.join(request, response, pool_id)


@router.get("/pools/{int:pool_id}/queue", response=queue_answers(join=False), tags=["waiting room"])
def pools_queue_poll(request, response: HttpResponse, pool_id: int):
    """Where the caller stands in the pool's waiting room, and the ticket once admitted; poll every
    few seconds. 404 `not_queued` once the ticket was used or lapsed, or before joining."""
    return QUEUE.poll(request, response, pool_id)


def _draw_out(draw: Draw) -> dict:
    return {
        "draw_id": draw.public_id,
        "pool_id": draw.pool_id,
        "prize": _prize_ref(draw.prize),
        "status": draw.status,
        "reason": draw.why,
        "created_at": draw.created_at,
        "claim_by": draw.hold_until,
    }


@router.get(
    "/draws", response=answers({200: list[DrawListOut]}, query=True), tags=["draws"], openapi_extra=paged_openapi()
)
def draws_list(request, response: HttpResponse, paging: Query[PageIn]):
    """The caller's draws, newest first, a page at a time: the next page is the answer's
    `Link` header's `next`, absent on the last page."""
    page = draw_page(user=request.auth, after=paging.after, size=paging.limit)
    return [_draw_out(draw) for draw in page_answer(request, response, paging, page)]


@router.get("/draws/{int:draw_id}", response=answers({200: DrawListOut}, item=True), tags=["draws"])
def draws_get(request, draw_id: int):
    return _draw_out(draw_get(user=request.auth, draw_id=draw_id))


CLAIM = ChangeCall(action="claim", product=POOL, record="draw", read=draw_get, change=draw_claim)


# 409 forfeited, already_claimed, nothing_held, pending (with Retry-After), idempotency_in_progress/interrupted.
@router.post(
    "/draws/{int:draw_id}/claim",
    response=change_answers(ClaimOut),
    openapi_extra=keyed_openapi(links.CLAIMED),
    tags=["draws"],
)
def draws_claim(request, draw_id: int, response: HttpResponse):
    return CLAIM.answer(request, response, draw_id)


@staff_write(router, "POST", "/admin/pools", {201: PoolOut}, links=links.POOL_CREATED)
def admin_pools_create(request, payload: PoolCreateIn):
    require_permission(request, "lottery.add_pool")
    pool = pool_create(**hold_window(payload.dict(), "claim_window_seconds"))
    return Status(201, _pool_out(pool_get(pool_id=pool.pk)))


@staff_write(router, "PATCH", "/admin/pools/{int:pool_id}", {200: PoolOut}, item=True, links=links.POOL_SHOWN)
def admin_pools_update(request, pool_id: int, payload: PoolPatchIn):
    require_permission(request, "lottery.change_pool")
    changes = hold_window(payload.dict(exclude_unset=True, exclude_none=True), "claim_window_seconds")
    pool_update(pool=pool_get(pool_id=pool_id), **changes)
    return _pool_out(pool_get(pool_id=pool_id))


@staff_write(router, "POST", "/admin/pools/{int:pool_id}/prizes", {201: PrizeOut}, item=True, links=links.PRIZE_CREATED)
def admin_prizes_create(request, pool_id: int, payload: PrizeCreateIn):
    require_permission(request, "lottery.add_prize")
    prize = prize_create(pool=pool_get(pool_id=pool_id), **payload.dict())
    return Status(201, _prize_probability_out(prize.pk))


@staff_write(router, "PATCH", "/admin/prizes/{int:prize_id}", {200: PrizeOut}, item=True, links=links.PRIZE_UPDATED)
def admin_prizes_update(request, prize_id: int, payload: PrizePatchIn):
    require_permission(request, "lottery.change_prize")
    prize_update(prize=prize_get(prize_id=prize_id), **payload.dict(exclude_unset=True, exclude_none=True))
    return _prize_probability_out(prize_id)


def _prize_probability_out(prize_id: int) -> dict:
    prize = prize_get(prize_id=prize_id)
    pool = pool_get(pool_id=prize.pool_id)
    return _prize_out(prize, pool_odds(pool=pool).by_prize[prize.pk])


@staff_read(router, "/admin/pools/{int:pool_id}/audit", {200: PoolAuditOut}, item=True)
def admin_pools_audit(request, pool_id: int):
    # The admin shows the audit on the pool's page: view, or change standing for it.
    require_permission(request, "lottery.view_pool", "lottery.change_pool")
    pool = pool_get(pool_id=pool_id)
    return pool_audit(pool_id=pool.pk).as_dict()
