"""The OpenAPI document declares, for every operation, every status its code paths can answer,
each error in the one error shape, and links that lead somewhere.

The rules follow what the code does (core.schemas.answers names it per operation): a call that
needs a login can answer 401; one whose method is unsafe takes a session, whose CSRF check
reads the body (400 for too many fields, 413) and may refuse (403); a staff call 403; an id in
the path 404; a JSON body 400, 413, 415 and 422; query parameters 422; the purchase, the draw,
the pay, the cancel, the claim, the login and the waiting room's join and poll 429; and
everything that reads the database or Redis 503. 429 and 503 say when to come back
(Retry-After). A new operation that forgets one fails here, before any client meets it.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

UNSAFE = {"post", "put", "patch", "delete"}
# The only operation that touches neither the database nor Redis: the load tests' baseline.
NO_STORE = {("get", "/api/ping")}
# Counted in Redis per user and address (core.ratelimit) or per account and address (the login).
RATE_LIMITED = {
    ("post", "/api/vouchers/{voucher_id}/purchase"),
    ("post", "/api/pools/{pool_id}/draw"),
    ("post", "/api/orders/{order_id}/pay"),
    ("post", "/api/orders/{order_id}/cancel"),
    ("post", "/api/draws/{draw_id}/claim"),
    ("post", "/api/auth/login"),
    ("post", "/api/vouchers/{voucher_id}/queue"),
    ("get", "/api/vouchers/{voucher_id}/queue"),
    ("post", "/api/pools/{pool_id}/queue"),
    ("get", "/api/pools/{pool_id}/queue"),
}
# Anyone may call them; a login tells more (a pool's draws left; to staff and the load
# crowd, a load run's unlisted item, which is 404 to everyone else).
OPTIONAL_LOGIN = {("get", "/api/pools/{pool_id}"), ("get", "/api/vouchers/{voucher_id}")}


@pytest.fixture(scope="module")
def document():
    return Client().get("/api/openapi.json").json()


def operations(document):
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield method, path, operation


def declared(operation) -> set[int]:
    return {int(status) for status in operation["responses"]}


def expected_errors(method: str, path: str, operation) -> set[int]:
    security = operation.get("security") or []
    login = bool(security) and {} not in security
    statuses = set()
    if login:
        statuses.add(401)
        if method in UNSAFE:
            statuses |= {400, 403, 413}
    if path.startswith("/api/admin/"):
        statuses.add(403)
    if re.search(r"\{\w+\}", path):
        statuses.add(404)
    if "requestBody" in operation:
        statuses |= {400, 413, 415, 422}
    if any(parameter["in"] == "query" for parameter in operation.get("parameters", ())):
        statuses.add(422)
    if (method, path) in RATE_LIMITED:
        statuses.add(429)
    if (method, path) not in NO_STORE:
        statuses.add(503)
    return statuses


def test_every_operation_declares_what_its_code_paths_answer(document):
    missing = {}
    for method, path, operation in operations(document):
        lacking = expected_errors(method, path, operation) - declared(operation)
        if lacking:
            missing[f"{method.upper()} {path}"] = sorted(lacking)
    assert not missing, missing


def test_the_rules_above_cover_every_operation_and_name_no_stale_one(document):
    known = {(method, path) for method, path, _ in operations(document)}
    assert len(known) >= 23
    assert RATE_LIMITED | NO_STORE | OPTIONAL_LOGIN <= known
    # Only the rate limited operations say 429, and only the optional ones take no login.
    assert {(m, p) for m, p, op in operations(document) if 429 in declared(op)} == RATE_LIMITED
    optional = {(m, p) for m, p, op in operations(document) if {} in (op.get("security") or [])}
    assert optional == OPTIONAL_LOGIN


def test_only_the_public_reads_and_the_login_take_no_login(document):
    public = {(method, path) for method, path, operation in operations(document) if not operation.get("security")}
    assert public == {
        ("get", "/api/ping"),
        ("post", "/api/auth/login"),
        ("get", "/api/vouchers"),
        ("get", "/api/pools"),
        # The payment provider's: its signature over the body is its proof (payments.signature).
        ("post", "/api/payments/callback"),
    }


def test_every_error_is_the_error_shape_in_json(document):
    assert document["components"]["schemas"]["ErrorOut"]["required"] == ["code", "message"]
    for method, path, operation in operations(document):
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorOut"}, (method, path, status)


def test_429_and_503_say_when_to_come_back(document):
    for method, path, operation in operations(document):
        for status, response in operation["responses"].items():
            if int(status) in (429, 503):
                header = response["headers"]["Retry-After"]
                assert header["required"] is True, (method, path, status)
                assert header["schema"] == {"type": "integer", "minimum": 1}


def test_every_link_leads_to_an_operation_and_its_parameters(document):
    by_id = {op["operationId"]: (method, path, op) for method, path, op in operations(document)}
    links = 0
    for method, path, operation in operations(document):
        for status, response in operation["responses"].items():
            for name, link in response.get("links", {}).items():
                links += 1
                where = f"{method.upper()} {path} {status} {name}"
                assert link["operationId"] in by_id, where
                _, _, target = by_id[link["operationId"]]
                takes = {p["name"] for p in target["parameters"] if p["in"] == "path"}
                assert set(link["parameters"]) == takes, where
                for expression in link["parameters"].values():
                    _assert_resolves(document, expression, path, response, where)
    assert links >= 30


def test_the_main_chains_are_linked(document):
    """Create a voucher, then read, change, buy and audit it; buy, then read or cancel the
    order; draw, then read or claim the draw."""
    by_id = {op["operationId"]: op for _, _, op in operations(document)}

    def targets(operation_id: str, status: int) -> set[str]:
        response = by_id[operation_id]["responses"][str(status)]
        return {link["operationId"] for link in response.get("links", {}).values()}

    assert targets("orders_api_admin_vouchers_create", 201) >= {
        "orders_api_vouchers_get",
        "orders_api_admin_vouchers_update",
        "orders_api_vouchers_purchase",
        "orders_api_admin_vouchers_audit",
    }
    for status in (201, 202):
        assert {"orders_api_orders_get", "orders_api_orders_cancel"} <= targets("orders_api_vouchers_purchase", status)
        assert {"lottery_api_draws_get", "lottery_api_draws_claim"} <= targets("lottery_api_pools_draw", status)
    assert targets("lottery_api_admin_pools_create", 201) >= {
        "lottery_api_pools_get",
        "lottery_api_pools_draw",
        "lottery_api_admin_prizes_create",
    }
    assert "lottery_api_admin_prizes_update" in targets("lottery_api_admin_prizes_create", 201)
    assert "lottery_api_draws_get" in targets("lottery_api_pools_draw", 201)
    assert "accounts_api_auth_token_revoke" in targets("accounts_api_auth_tokens", 200)


def _assert_resolves(document, expression: str, path: str, response, where: str) -> None:
    if expression.startswith("$request.path."):
        assert "{" + expression.removeprefix("$request.path.") + "}" in path, where
        return
    assert expression.startswith("$response.body#/"), where
    schema = response["content"]["application/json"]["schema"]
    for part in expression.removeprefix("$response.body#/").split("/"):
        schema = _resolve(document, schema)
        if part.isdigit():
            assert schema.get("type") == "array", where
            schema = schema["items"]
        else:
            assert part in schema.get("properties", {}), where
            schema = schema["properties"][part]
    assert _resolve(document, schema).get("type") == "integer", where


def _resolve(document, schema: dict) -> dict:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def test_an_order_and_a_draw_name_their_id_alike_and_the_old_name_is_deprecated(document):
    """Orders answered `id` where draws answer `draw_id`: both now name the record, and the
    orders' `id` stays, the same number, marked deprecated in the document."""
    schemas = document["components"]["schemas"]

    def item(path: str) -> dict:
        ref = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        ref = ref.get("items", ref)["$ref"]
        return schemas[ref.rsplit("/", 1)[1]]

    orders, draws = item("/api/orders"), item("/api/draws")
    assert item("/api/orders/{order_id}") == orders and item("/api/draws/{draw_id}") == draws
    assert {"order_id", "id"} <= set(orders["required"]) and "draw_id" in draws["required"]
    assert orders["properties"]["id"].get("deprecated") is True
    assert not orders["properties"]["order_id"].get("deprecated")
    assert "id" not in draws["properties"]
