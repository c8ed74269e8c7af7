"""Server-rendered prize draw pages. They parse, call the same selectors and services as the API,
and render."""

from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from accounts.decorators import staff_required
from core.errors import DomainError
from inventory.forms import StrategyForm
from inventory.views import strategy_switch

from .selectors import (
    draw_list,
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
    draws_left = max(0, pool.draws_per_user - draws_used(pool=pool, user=request.user))
    return {
        "pool": pool,
        "draws_left": draws_left,
        "my_draws": draw_list(user=request.user, pool=pool),
        "refusal": pool_draw_refusal(pool=pool, draws_left=draws_left, empty=empty),
    }


@require_GET
def pool_list_page(request):
    return render(request, "lottery/pool_list.html", {"pools": pool_list_audited()})


@require_GET
def pool_rows_partial(request):
    """The live rows of the list page, polled by it."""
    return render(request, "lottery/_pool_rows.html", {"pools": pool_list_audited()})


@require_GET
def pool_detail_page(request, pool_id: int):
    pool = pool_get(pool_id=pool_id)
    context = {**_odds_context(pool), **_standing_context(request, pool)}
    if request.user.is_staff:
        context["strategy_form"] = StrategyForm(initial={"strategy": pool.strategy})
    return render(request, "lottery/pool_detail.html", context)


@require_GET
def pool_odds_partial(request, pool_id: int):
    """Each prize's stock and probability now, polled by the pool page and reloaded after a draw."""
    return render(request, "lottery/_odds.html", _odds_context(pool_get(pool_id=pool_id)))


@require_GET
def pool_standing_partial(request, pool_id: int):
    """The user's draws left, the Draw button and past draws, polled and reloaded after a draw."""
    return render(request, "lottery/_standing.html", _standing_context(request, pool_get(pool_id=pool_id)))


@require_POST
def pool_draw_view(request, pool_id: int):
    """The Draw button: answers with the outcome fragment that htmx swaps in place."""
    pool = pool_for_draw(pool_id=pool_id)
    if not request.user.is_authenticated:
        return render(request, "lottery/_draw_outcome.html", {"outcome": "login", "pool": pool})
    try:
        draw = pool_draw(user=request.user, pool=pool)
    except DomainError as exc:
        context = {"outcome": exc.code, "message": exc.message, "pool": pool}
    else:
        context = {"outcome": "no_prize" if draw.prize_id is None else "won", "draw": draw, "pool": pool}
    response = render(request, "lottery/_draw_outcome.html", context)
    # A refusal may mean the page is stale (the last draw was used in another tab, the
    # prizes ran out), so it reloads too.
    response["HX-Trigger"] = DRAWN
    return response


@staff_required
@require_POST
def pool_strategy_switch(request, pool_id: int):
    """Staff switch the pool's strategy from its page, through the same service as the API."""
    pool = pool_get(pool_id=pool_id)
    return strategy_switch(
        request, switch=lambda name: pool_update(pool=pool, strategy=name), then="lottery:pool_detail", pool_id=pool.pk
    )
