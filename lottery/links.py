"""The prize draw's OpenAPI links: from a pool's creation or the list to its prizes, its
draws, and the draw it made and its claim (``core.links``)."""

from __future__ import annotations

from core.links import answered, calls

# The calls on one pool, which take its id.
POOL_CALLS = {
    "GetPool": "lottery_api_pools_get",
    "DrawFromPool": "lottery_api_pools_draw",
    "UpdatePool": "lottery_api_admin_pools_update",
    "AddPrize": "lottery_api_admin_prizes_create",
    "AuditPool": "lottery_api_admin_pools_audit",
}
_UPDATE_PRIZE = {"UpdatePrize": "lottery_api_admin_prizes_update"}

POOL_LIST = answered(calls(POOL_CALLS, {"pool_id": "$response.body#/0/id"}), 200)
POOL_CREATED = answered(calls(POOL_CALLS, {"pool_id": "$response.body#/id"}), 201)
POOL_SHOWN = answered(
    {
        **calls(POOL_CALLS, {"pool_id": "$response.body#/id"}),
        **calls(_UPDATE_PRIZE, {"prize_id": "$response.body#/prizes/0/id"}),
    },
    200,
)

# From a prize just added or changed: the prize itself, and its pool by the path's id.
_PRIZE = {
    **calls(_UPDATE_PRIZE, {"prize_id": "$response.body#/id"}),
    **calls(
        {"DrawFromPool": "lottery_api_pools_draw", "GetPool": "lottery_api_pools_get"},
        {"pool_id": "$request.path.pool_id"},
    ),
}
PRIZE_CREATED = answered(_PRIZE, 201)
PRIZE_UPDATED = answered({"UpdatePrize": _PRIZE["UpdatePrize"]}, 200)

# The calls on one draw, which take its id.
DRAW_CALLS = {"GetDraw": "lottery_api_draws_get", "ClaimDraw": "lottery_api_draws_claim"}

DRAWN = answered(
    {
        **calls(DRAW_CALLS, {"draw_id": "$response.body#/draw_id"}),
        # The same user again: the next draw, then draw_limit or pool_empty.
        **calls({"DrawAgain": "lottery_api_pools_draw"}, {"pool_id": "$request.path.pool_id"}),
    },
    201,
    202,
)

# From a claim: the draw again, and its claim again (already_claimed).
CLAIMED = answered(calls(DRAW_CALLS, {"draw_id": "$response.body#/draw_id"}), 200)
