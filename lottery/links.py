"""The prize draw's OpenAPI links: which answer gives the id that the next call takes, so
that a client (and the contract test's stateful run) can follow a pool from its creation or
the list to its prizes, its draws and the draw it made."""

from __future__ import annotations


def _pool_calls(pool_id: str) -> dict:
    """The calls on one pool, whose id is at ``pool_id`` (a runtime expression)."""
    ids = {"pool_id": pool_id}
    return {
        "GetPool": {"operationId": "lottery_api_pools_get", "parameters": ids},
        "DrawFromPool": {"operationId": "lottery_api_pools_draw", "parameters": ids},
        "UpdatePool": {"operationId": "lottery_api_admin_pools_update", "parameters": ids},
        "AddPrize": {"operationId": "lottery_api_admin_prizes_create", "parameters": ids},
        "AuditPool": {"operationId": "lottery_api_admin_pools_audit", "parameters": ids},
    }


POOL_LIST = {"responses": {200: {"links": _pool_calls("$response.body#/0/id")}}}
POOL_CREATED = {"responses": {201: {"links": _pool_calls("$response.body#/id")}}}
POOL_SHOWN = {
    "responses": {
        200: {
            "links": {
                **_pool_calls("$response.body#/id"),
                "UpdatePrize": {
                    "operationId": "lottery_api_admin_prizes_update",
                    "parameters": {"prize_id": "$response.body#/prizes/0/id"},
                },
            }
        }
    }
}

_PRIZE = {
    "UpdatePrize": {"operationId": "lottery_api_admin_prizes_update", "parameters": {"prize_id": "$response.body#/id"}},
    "DrawFromPool": {"operationId": "lottery_api_pools_draw", "parameters": {"pool_id": "$request.path.pool_id"}},
    "GetPool": {"operationId": "lottery_api_pools_get", "parameters": {"pool_id": "$request.path.pool_id"}},
}
PRIZE_CREATED = {"responses": {201: {"links": _PRIZE}}}
PRIZE_UPDATED = {"responses": {200: {"links": {"UpdatePrize": _PRIZE["UpdatePrize"]}}}}

_DRAWN = {
    "GetDraw": {"operationId": "lottery_api_draws_get", "parameters": {"draw_id": "$response.body#/draw_id"}},
    # The same user again: the next draw, then draw_limit or pool_empty.
    "DrawAgain": {"operationId": "lottery_api_pools_draw", "parameters": {"pool_id": "$request.path.pool_id"}},
}
DRAWN = {"responses": {201: {"links": _DRAWN}, 202: {"links": _DRAWN}}}
