"""Server-rendered prize draw pages. They parse, call the same selectors and services as the API,
and render; the Draw and Claim buttons make their draw and claim through the API's calls
(``.api``: the same idempotency keys, metrics and rate limits). Live state on every page and
fragment here: none is kept by the browser (inventory.pages)."""

from accounts.decorators import staff_permission_required
from accounts.permissions import staff_holds
from accounts.unlisted import item_shown
from core.errors import Unavailable
from inventory.forms import StrategyForm
from inventory.pages import TakePages, live_view

from .api import CLAIM, DRAW
from .selectors import (
    draw_get,
    draw_list,
    draw_page,
    draws_used,
    pool_draw_refusal,
    pool_get,
    pool_list_marked,
    pool_marks,
    pool_odds,
    pool_shown,
    prize_marks,
)
from .services import pool_update

# The list page and its live rows, polled by it.
pool_list_page = live_view("lottery/pool_list.html", lambda request: {"pools": pool_list_marked()})
pool_rows_partial = live_view("lottery/_pool_rows.html", lambda request: {"pools": pool_list_marked()})


def _odds_context(pool) -> dict:
    odds = pool_odds(pool=pool)
    prizes = [
        {"prize": prize, "percent": odds.by_prize[prize.pk] * 100, "marks": prize_marks(prize)}
        for prize in pool.prizes.all()
    ]
    return {
        "pool": pool,
        "prizes": prizes,
        "no_prize_percent": odds.no_prize * 100,
        "empty": odds.empty,
        "marks": pool_marks(pool=pool),
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
    # The newest page of them, polled every two seconds: a pool's limit may allow a million
    # draws a user, and the draws' own page pages through the rest.
    try:
        used = draws_used(pool=pool, user=request.user)
        # Under redis_lua, with the draws still pending or failed (read from Redis).
        page, unread = draw_page(user=request.user, pool=pool), False
    except Unavailable:
        # Redis out of reach: the written draws, and a word that others may be missing.
        page, unread = draw_page(user=request.user, pool=pool, reserved=False), True
        used = draw_list(user=request.user, pool=pool).count()
    draws_left = max(0, pool.draws_per_user - used)
    return {
        "pool": pool,
        "draws_left": draws_left,
        # A prize held shows its claim's countdown and button, a claimed or forfeited one its state.
        "my_draws": DRAWS.states(page.records),
        "more_draws": page.next is not None,
        "unread": unread,
        "refusal": pool_draw_refusal(pool=pool, draws_left=draws_left, empty=empty),
        "queue": DRAWS.queue_standing(request, pool),
    }


def _page_context(request, pool_id: int) -> dict:
    """The odds, the user's standing, and the strategy switch for staff who may change the pool."""
    pool = pool_shown(pool_id=pool_id, user=request.user)
    context = {**_odds_context(pool), **_standing_context(request, pool)}
    if staff_holds(request.user, "lottery.change_pool"):
        context["strategy_form"] = StrategyForm(initial={"strategy": pool.strategy})
    return context


# The pool's page and its draws: the Draw button's answer, and the draws it makes. Its event,
# raised by the answer, reloads the odds and the user's standing.
DRAWS = TakePages(
    "lottery/_draw_outcome.html",
    event="drawn",
    take=DRAW,
    item="pool",
    record="draw",
    verb="draw",
    confirmed=lambda draw: "no_prize" if draw.prize_id is None else "won",
    shown=item_shown,
)
pool_detail_page = DRAWS.item_view("lottery/pool_detail.html", _page_context)
# Each prize's stock and probability now, polled by the pool page and reloaded after a draw.
pool_odds_partial = DRAWS.item_view(
    "lottery/_odds.html",
    lambda request, pool_id: _odds_context(pool_shown(pool_id=pool_id, user=request.user)),
    part="odds",
)
# The user's draws left, the Draw button and past draws, polled and reloaded after a draw.
pool_standing_partial = DRAWS.item_view(
    "lottery/_standing.html",
    lambda request, pool_id: _standing_context(request, pool_shown(pool_id=pool_id, user=request.user)),
    part="standing",
)

pool_draw_view = DRAWS.take_view()
# The Join button of a pool with a waiting room.
pool_queue_join = DRAWS.queue_view()
# A draw's fragment, and a won prize's Claim before its claim_by.
draw_status_partial = DRAWS.status_view(read=draw_get, changes=[CLAIM])
# The user's draws in every pool, a page at a time, with those still pending or failed under ``redis_lua``.
draw_list_page = DRAWS.list_view("lottery/draw_list.html", read=draw_page)

# Staff switch the pool's strategy from its page, through the same service as the API.
pool_strategy_switch = DRAWS.switch_view(
    find=pool_get, update=pool_update, guard=staff_permission_required("lottery.change_pool")
)
