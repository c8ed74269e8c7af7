"""Server-rendered prize draw pages. They parse, call the same selectors and services as the API,
and render."""

from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from core.errors import DomainError

from .selectors import draw_list, draws_used, pool_for_draw, pool_get, pool_list_with_totals, pool_odds
from .services import pool_draw

# The event the draw's answer raises; the odds and the user's standing reload on it.
DRAWN = "drawn"


def _odds_context(pool) -> dict:
    odds = pool_odds(pool=pool)
    prizes = [{"prize": prize, "percent": odds.by_prize[prize.pk] * 100} for prize in pool.prizes.all()]
    return {"pool": pool, "prizes": prizes, "no_prize_percent": odds.no_prize * 100, "empty": odds.empty}


def _standing_context(request, pool) -> dict:
    if not request.user.is_authenticated:
        return {"pool": pool, "draws_left": None, "my_draws": []}
    return {
        "pool": pool,
        "draws_left": max(0, pool.draws_per_user - draws_used(pool=pool, user=request.user)),
        "my_draws": draw_list(user=request.user, pool=pool),
    }


@require_GET
def pool_list_page(request):
    return render(request, "lottery/pool_list.html", {"pools": pool_list_with_totals()})


@require_GET
def pool_rows_partial(request):
    """The live rows of the list page, polled by it."""
    return render(request, "lottery/_pool_rows.html", {"pools": pool_list_with_totals()})


@require_GET
def pool_detail_page(request, pool_id: int):
    pool = pool_get(pool_id=pool_id)
    return render(request, "lottery/pool_detail.html", {**_odds_context(pool), **_standing_context(request, pool)})


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
