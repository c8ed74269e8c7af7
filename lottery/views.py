"""Server-rendered prize draw pages. They parse, call the same selectors and services as the API,
and render."""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from accounts.decorators import staff_permission_required
from accounts.permissions import staff_holds
from core.errors import DomainError, Unavailable
from core.ratelimit import client_address, rate_count
from inventory.forms import StrategyForm
from inventory.views import strategy_switch

from .models import Draw
from .selectors import (
    draw_get,
    draw_list,
    draw_list_all,
    draws_used,
    pool_audit,
    pool_draw_refusal,
    pool_for_draw,
    pool_get,
    pool_list_audited,
    pool_odds,
)
from .services import pool_draw, pool_update

# The event the draw's answer raises; the odds and the user's standing reload on it.
DRAWN = "drawn"

# Live state on every page and fragment here: none is kept by the browser (as orders.views).


def _odds_context(pool) -> dict:
    odds = pool_odds(pool=pool)
    audit = pool_audit(pool_id=pool.pk)
    prize_audits = {prize.prize_id: prize for prize in audit.prizes}
    prizes = [
        {"prize": prize, "percent": odds.by_prize[prize.pk] * 100, "audit": prize_audits.get(prize.pk)}
        for prize in pool.prizes.all()
    ]
    return {
        "pool": pool,
        "prizes": prizes,
        "no_prize_percent": odds.no_prize * 100,
        "empty": odds.empty,
        "audit": audit,
    }


def _standing_context(request, pool) -> dict:
    empty = pool_odds(pool=pool).empty
    if not request.user.is_authenticated:
        return {
            "pool": pool,
            "draws_left": None,
            "my_draws": [],
            "refusal": pool_draw_refusal(pool=pool, draws_left=None, empty=empty),
        }
    try:
        used = draws_used(pool=pool, user=request.user)
        # Under redis_lua, with the draws still pending or failed (read from Redis).
        my_draws, unread = draw_list_all(user=request.user, pool=pool), False
    except Unavailable:
        # Redis out of reach: the written draws, and a word that others may be missing.
        my_draws, unread = list(draw_list(user=request.user, pool=pool)), True
        used = len(my_draws)
    draws_left = max(0, pool.draws_per_user - used)
    return {
        "pool": pool,
        "draws_left": draws_left,
        "my_draws": my_draws,
        "unread": unread,
        "refusal": pool_draw_refusal(pool=pool, draws_left=draws_left, empty=empty),
    }


@never_cache
@require_GET
def pool_list_page(request):
    return render(request, "lottery/pool_list.html", {"pools": pool_list_audited()})


@never_cache
@require_GET
def pool_rows_partial(request):
    """The live rows of the list page, polled by it."""
    return render(request, "lottery/_pool_rows.html", {"pools": pool_list_audited()})


@never_cache
@require_GET
def pool_detail_page(request, pool_id: int):
    pool = pool_get(pool_id=pool_id)
    context = {**_odds_context(pool), **_standing_context(request, pool)}
    if staff_holds(request.user, "lottery.change_pool"):
        context["strategy_form"] = StrategyForm(initial={"strategy": pool.strategy})
    return render(request, "lottery/pool_detail.html", context)


@never_cache
@require_GET
def pool_odds_partial(request, pool_id: int):
    """Each prize's stock and probability now, polled by the pool page and reloaded after a draw."""
    return render(request, "lottery/_odds.html", _odds_context(pool_get(pool_id=pool_id)))


@never_cache
@require_GET
def pool_standing_partial(request, pool_id: int):
    """The user's draws left, the Draw button and past draws, polled and reloaded after a draw."""
    return render(request, "lottery/_standing.html", _standing_context(request, pool_get(pool_id=pool_id)))


@never_cache
@require_POST
def pool_draw_view(request, pool_id: int):
    """The Draw button: answers with the outcome fragment that htmx swaps in place."""
    pool = pool_for_draw(pool_id=pool_id)
    if not request.user.is_authenticated:
        return render(request, "lottery/_draw_outcome.html", {"outcome": "login", "pool": pool})
    try:
        rate = rate_count(action="draw", user_id=request.user.pk, address=client_address(request))
        draw = pool_draw(user=request.user, pool=pool, rate=rate)
    except DomainError as exc:
        context = {"outcome": exc.code, "message": exc.message, "pool": pool}
    else:
        context = _draw_outcome(draw, pool)
    response = render(request, "lottery/_draw_outcome.html", context)
    # A refusal may mean the page is stale (the last draw was used in another tab, the
    # prizes ran out), so it reloads too.
    response["HX-Trigger"] = DRAWN
    return response


def _draw_outcome(draw: Draw, pool) -> dict:
    """The outcome fragment's context for a draw as it stands: a pending one (``redis_lua``:
    its prize reserved, the draw not written yet) polls ``draw_status_partial`` until it is
    confirmed or failed."""
    if draw.status == Draw.Status.PENDING:
        outcome = "pending"
    elif draw.status == Draw.Status.FAILED:
        outcome = "failed"
    else:
        outcome = "no_prize" if draw.prize_id is None else "won"
    return {"outcome": outcome, "draw": draw, "draw_id": draw.public_id, "pool": pool}


@never_cache
@require_GET
def draw_status_partial(request, draw_id: int):
    """The outcome of a draw answered pending, by the id it was answered with: polled by that
    outcome, which this answer replaces, until the draw is confirmed or failed."""
    if not request.user.is_authenticated:
        return render(request, "lottery/_draw_outcome.html", {"outcome": "login"})
    try:
        draw = draw_get(user=request.user, draw_id=draw_id)
    except Unavailable:
        # Redis out of reach: nothing is known yet, so keep asking.
        return render(request, "lottery/_draw_outcome.html", {"outcome": "pending", "draw_id": draw_id, "unread": True})
    except Http404:
        # Answered, not raised: a polled 404 would not be swapped in, and the poll would go on.
        return render(request, "lottery/_draw_outcome.html", {"outcome": "unknown_draw", "draw_id": draw_id})
    response = render(request, "lottery/_draw_outcome.html", _draw_outcome(draw, draw.pool))
    if draw.status != Draw.Status.PENDING:
        # Settled: the odds, the draws left and my draws may have changed with it.
        response["HX-Trigger"] = DRAWN
    return response


@staff_permission_required("lottery.change_pool")
@require_POST
def pool_strategy_switch(request, pool_id: int):
    """Staff switch the pool's strategy from its page, through the same service as the API."""
    pool = pool_get(pool_id=pool_id)
    return strategy_switch(
        request, switch=lambda name: pool_update(pool=pool, strategy=name), then="lottery:pool_detail", pool_id=pool.pk
    )


@never_cache
@login_required
@require_GET
def draw_list_page(request):
    """The user's draws in every pool, with those still pending or failed under ``redis_lua``."""
    try:
        draws, unread = draw_list_all(user=request.user), False
    except Unavailable:
        # Redis out of reach: the written draws, and a word that others may be missing.
        draws, unread = list(draw_list(user=request.user)), True
    return render(request, "lottery/draw_list.html", {"draws": draws, "unread": unread})
