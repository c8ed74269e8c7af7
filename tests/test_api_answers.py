"""The purchase's and the draw's answers, written by the views without ninja's validation
(core.api.json_answer), are what the OpenAPI document promises: each status, its schema,
no field more, and the same content type as every other answer."""

from __future__ import annotations

import jsonschema_rs
import pytest
from django.test import Client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]

PURCHASE = ("post", "/api/vouchers/{voucher_id}/purchase")
DRAW = ("post", "/api/pools/{pool_id}/draw")


@pytest.fixture(scope="module")
def document():
    return Client().get("/api/openapi.json").json()


def assert_documented(document, operation: tuple[str, str], response) -> dict:
    method, path = operation
    declared = document["paths"][path][method]["responses"]
    assert str(response.status_code) in declared, response.content
    schema = declared[str(response.status_code)]["content"]["application/json"]["schema"]
    # The references point into the document's components: validate within them.
    jsonschema_rs.Draft202012Validator({**schema, "components": document["components"]}).validate(response.json())
    body = response.json()
    target = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    assert set(body) == set(target["properties"]), body
    assert response["Content-Type"] == Client().get("/api/ping")["Content-Type"]
    return body


@pytest.mark.parametrize(("strategy", "status"), [("db_atomic", 201), ("redis_lua", 202)])
def test_a_purchase_answers_as_documented(api_client, make_voucher, document, strategy, status):
    voucher = make_voucher(stock=1, strategy=strategy)
    response = api_client().post(f"/api/vouchers/{voucher.pk}/purchase")
    assert response.status_code == status
    body = assert_documented(document, PURCHASE, response)
    assert body["status"] == ("pending" if strategy == "redis_lua" else "confirmed")


@pytest.mark.parametrize(("strategy", "status"), [("db_atomic", 201), ("redis_lua", 202)])
def test_a_draw_answers_as_documented_with_a_prize_and_without(api_client, make_pool, document, strategy, status):
    won = make_pool(prizes=(("Gold", 5),), no_prize_weight=0, strategy=strategy, draws_per_user=2)
    lost = make_pool(prizes=(("Gold", 1),), no_prize_weight=10**9, strategy=strategy, draws_per_user=2)
    player = api_client()
    prize = assert_documented(document, DRAW, player.post(f"/api/pools/{won.pk}/draw"))
    assert prize["prize"]["name"] == "Gold"
    assert prize["draws_left"] == 1
    response = player.post(f"/api/pools/{lost.pk}/draw")
    assert response.status_code == status
    nothing = assert_documented(document, DRAW, response)
    assert nothing["prize"] is None


def test_a_refusal_is_still_the_error_shape(api_client, make_voucher):
    voucher = make_voucher(stock=0, strategy="redis_lua")
    response = api_client().post(f"/api/vouchers/{voucher.pk}/purchase")
    assert response.status_code == 409
    assert response.json()["code"] == "sold_out"
