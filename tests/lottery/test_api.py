"""The prize draw's HTTP API, row by row, including bad input and refusals.

Every refusal is checked to leave nothing behind: no draw, no stock change, no pool.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from inventory.models import Stock
from lottery.models import Draw, Pool, Prize
from tests.records import answered_row

from ..http import assert_error, patch_json, post_json

pytestmark = pytest.mark.django_db


def stock_snapshot(pool) -> list[tuple[int, int]]:
    ids = [prize.stock_id for prize in pool.prizes.all()]
    return list(Stock.objects.filter(pk__in=ids).order_by("id").values_list("quantity", "initial_quantity"))


def window(**shift) -> dict:
    begin = timezone.now() + timedelta(**shift)
    return {"begin_at": begin.isoformat(), "end_at": (begin + timedelta(hours=1)).isoformat()}


# --- reading pools ------------------------------------------------------------------------------


def test_pools_are_listed_with_their_window_limit_and_strategy(make_pool):
    pool = make_pool(strategy="redis_lock", draws_per_user=4)
    [item] = Client().get("/api/pools").json()
    assert item == {
        "id": pool.pk,
        "name": "Test pool",
        "begin_at": item["begin_at"],
        "end_at": item["end_at"],
        "draws_per_user": 4,
        "strategy": "redis_lock",
        "state": "live",
        "admission": "open",
        "admission_rate": 10.0,
        "admission_ticket_seconds": 60,
    }


def test_a_pool_shows_each_prize_with_its_stock_and_probability(make_pool):
    pool = make_pool(prizes=(("Gold", 1), ("Silver", 3)), no_prize_weight=4)
    body = Client().get(f"/api/pools/{pool.pk}").json()
    assert body["no_prize_probability"] == 0.5
    assert [(p["name"], p["stock"], p["initial_stock"], p["probability"]) for p in body["prizes"]] == [
        ("Gold", 1, 1, 0.125),
        ("Silver", 3, 3, 0.375),
    ]
    assert body["draws_left"] is None  # nobody asked
    assert {"description", "begin_at", "end_at", "draws_per_user", "no_prize_weight", "strategy", "state"} <= set(body)


def test_an_authenticated_caller_sees_the_draws_left(make_pool, api_client):
    pool = make_pool(draws_per_user=3)
    client = api_client()
    assert client.post(f"/api/pools/{pool.pk}/draw").status_code == 201
    assert client.get(f"/api/pools/{pool.pk}").json()["draws_left"] == 2


def test_an_unknown_pool_is_404(make_pool):
    assert_error(Client().get("/api/pools/999999"), 404, "not_found")


# --- drawing --------------------------------------------------------------------------------------


def test_a_draw_answers_the_prize_and_the_draws_left(make_pool, api_client):
    pool = make_pool(prizes=(("Only", 2),), draws_per_user=2)
    client = api_client()
    response = client.post(f"/api/pools/{pool.pk}/draw")
    assert response.status_code == 201
    body = response.json()
    prize = pool.prizes.get()
    assert body["prize"] == {"id": prize.pk, "name": "Only"}
    assert body["draws_left"] == 1
    draw = answered_row(Draw, body["draw_id"])
    assert (draw.user_id, draw.pool_id, draw.prize_id) == (client.user.pk, pool.pk, prize.pk)
    assert stock_snapshot(pool) == [(1, 2)]


def test_a_no_prize_draw_answers_null(make_pool, api_client):
    pool = make_pool(prizes=(("Gold", 0), ("Silver", 1)), no_prize_weight=10**9, draws_per_user=5)
    client = api_client()
    prizes = [client.post(f"/api/pools/{pool.pk}/draw").json()["prize"] for _ in range(5)]
    assert prizes.count(None) >= 4  # "no prize" has 10**9 tickets to Silver's one


def test_the_draw_accepts_an_empty_json_object(make_pool, api_client):
    assert post_json(api_client(), f"/api/pools/{make_pool().pk}/draw", {}).status_code == 201


@pytest.mark.parametrize("body", ['{"prize": 1}', "[]", "{not json", '{"user_id": 5}'])
def test_a_draw_with_a_body_is_refused_whole(make_pool, api_client, body):
    pool = make_pool()
    response = post_json(api_client(), f"/api/pools/{pool.pk}/draw", body)
    assert_error(response, 400, "bad_request")
    assert not Draw.objects.exists()
    assert stock_snapshot(pool) == [(1, 1), (19, 19)]


def test_drawing_past_the_limit_is_409_draw_limit(make_pool, api_client):
    pool = make_pool(draws_per_user=1)
    client = api_client()
    assert client.post(f"/api/pools/{pool.pk}/draw").status_code == 201
    before = stock_snapshot(pool)
    assert_error(client.post(f"/api/pools/{pool.pk}/draw"), 409, "draw_limit")
    assert Draw.objects.count() == 1
    assert stock_snapshot(pool) == before


def test_an_empty_pool_is_409_pool_empty(make_pool, api_client):
    pool = make_pool(prizes=(("Gold", 0),), no_prize_weight=3)
    assert_error(api_client().post(f"/api/pools/{pool.pk}/draw"), 409, "pool_empty")
    assert not Draw.objects.exists()


@pytest.mark.parametrize(("starts_in", "code"), [(timedelta(minutes=5), "not_started"), (-timedelta(hours=2), "ended")])
def test_a_draw_outside_the_window_is_403(make_pool, api_client, starts_in, code):
    pool = make_pool(starts_in=starts_in)
    assert_error(api_client().post(f"/api/pools/{pool.pk}/draw"), 403, code)
    assert not Draw.objects.exists()


def test_an_anonymous_draw_is_401_and_an_unknown_pool_404(make_pool, api_client):
    pool = make_pool()
    assert_error(Client().post(f"/api/pools/{pool.pk}/draw"), 401, "unauthorized")
    assert_error(api_client().post("/api/pools/999999/draw"), 404, "not_found")
    assert not Draw.objects.exists()


def test_my_draws_are_mine_only_newest_first(make_pool, api_client):
    pool = make_pool(draws_per_user=3)
    me, someone = api_client(), api_client()
    ids = [me.post(f"/api/pools/{pool.pk}/draw").json()["draw_id"] for _ in range(2)]
    someone.post(f"/api/pools/{pool.pk}/draw")
    body = me.get("/api/draws").json()
    assert [d["draw_id"] for d in body] == ids[::-1]
    assert {d["pool_id"] for d in body} == {pool.pk}
    assert all(d["status"] == "confirmed" and d["prize"]["name"] in ("Gold", "Silver") for d in body)
    assert_error(Client().get("/api/draws"), 401, "unauthorized")


# --- staff ----------------------------------------------------------------------------------------


def pool_body(**overrides) -> dict:
    return {
        "name": "Spring draw",
        "draws_per_user": 2,
        "no_prize_weight": 10,
        "strategy": "db_pessimistic",
        **window(minutes=-1),
        **overrides,
    }


def test_staff_create_a_pool_and_its_prizes(api_client):
    staff = api_client(staff=True)
    response = post_json(staff, "/api/admin/pools", pool_body(description="Twice each"))
    assert response.status_code == 201, response.content
    pool = response.json()
    assert (pool["name"], pool["strategy"], pool["prizes"], pool["description"]) == (
        "Spring draw",
        "db_pessimistic",
        [],
        "Twice each",
    )
    prize = post_json(staff, f"/api/admin/pools/{pool['id']}/prizes", {"name": "Kite", "stock": 10, "value": "9.50"})
    assert prize.status_code == 201, prize.content
    assert (prize.json()["stock"], prize.json()["value"], prize.json()["probability"]) == (10, "9.50", 0.5)
    assert Prize.objects.get(pk=prize.json()["id"]).stock.group_id == Pool.objects.get(pk=pool["id"]).group_id


@pytest.mark.parametrize(
    "overrides",
    [
        {"draws_per_user": 0},
        {"draws_per_user": -1},
        {"draws_per_user": 1.5},
        {"draws_per_user": "2"},
        {"no_prize_weight": -5},
        {"no_prize_weight": 2.5},
        {"strategy": "magic"},
        {"name": ""},
        {"begin_at": "2026-01-01T10:00:00"},  # no offset
        window(minutes=-1) | {"end_at": (timezone.now() - timedelta(days=1)).isoformat()},
    ],
)
def test_bad_pools_are_refused_and_nothing_is_written(api_client, overrides):
    response = post_json(api_client(staff=True), "/api/admin/pools", pool_body(**overrides))
    assert_error(response, 422, "invalid")
    assert not Pool.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"name": "Kite", "stock": -1},
        {"name": "Kite", "stock": 2.5},
        {"name": "Kite", "stock": "3"},
        {"name": "", "stock": 3},
        {"name": "Kite", "stock": 3, "value": -1},
        {"name": "Kite", "stock": 3, "value": "NaN"},
        {"stock": 3},
    ],
)
def test_bad_prizes_are_refused_and_nothing_is_written(make_pool, api_client, body):
    pool = make_pool()
    assert_error(post_json(api_client(staff=True), f"/api/admin/pools/{pool.pk}/prizes", body), 422, "invalid")
    assert pool.prizes.count() == 2


def test_staff_change_a_pool(make_pool, api_client):
    pool = make_pool(strategy="db_atomic")
    staff = api_client(staff=True)
    body = patch_json(staff, f"/api/admin/pools/{pool.pk}", {"strategy": "redlock", "draws_per_user": 9}).json()
    assert (body["strategy"], body["draws_per_user"]) == ("redlock", 9)
    assert_error(patch_json(staff, f"/api/admin/pools/{pool.pk}", {"no_prize_weight": -1}), 422, "invalid")
    assert_error(patch_json(staff, "/api/admin/pools/999999", {"strategy": "none"}), 404, "not_found")
    assert Pool.objects.get(pk=pool.pk).no_prize_weight == 0


def test_staff_restock_a_prize_through_the_guarded_service(make_pool, api_client):
    pool = make_pool(prizes=(("Gold", 1),))
    prize = pool.prizes.get()
    group_version = pool.group.version
    staff = api_client(staff=True)
    response = patch_json(staff, f"/api/admin/prizes/{prize.pk}", {"restock": 4, "name": "Golden"})
    assert response.status_code == 200, response.content
    assert (response.json()["stock"], response.json()["initial_stock"], response.json()["name"]) == (5, 5, "Golden")
    pool.group.refresh_from_db()
    assert pool.group.version > group_version  # a db_optimistic take that read before the restock chooses again
    for bad in ({"restock": 0}, {"restock": -3}, {"restock": 1.5}, {"name": ""}):
        assert_error(patch_json(staff, f"/api/admin/prizes/{prize.pk}", bad), 422, "invalid")
    assert stock_snapshot(pool) == [(5, 5)]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/admin/pools/{pool}", {"name": "Renamed"}),
        ("/api/admin/pools/{pool}", {"strategy": "none", "stock": 100}),
        ("/api/admin/prizes/{prize}", {"stock": 100}),  # stock is restocked, never set
        ("/api/admin/prizes/{prize}", {"restock": 2, "probability": 0.5}),
    ],
)
def test_staff_patches_refuse_fields_they_do_not_take(make_pool, api_client, path, body):
    pool = make_pool(strategy="db_atomic")
    url = path.format(pool=pool.pk, prize=pool.prizes.first().pk)
    response = patch_json(api_client(staff=True), url, body)
    assert_error(response, 422, "invalid")
    assert "not a field this call takes" in response.json()["message"]
    assert Pool.objects.filter(pk=pool.pk, name="Test pool", strategy="db_atomic").exists()
    assert stock_snapshot(pool) == [(1, 1), (19, 19)]


def test_staff_creates_refuse_fields_they_do_not_take(make_pool, api_client):
    staff = api_client(staff=True)
    assert_error(post_json(staff, "/api/admin/pools", pool_body(prizes=[])), 422, "invalid")
    pool = make_pool()
    assert_error(post_json(staff, f"/api/admin/pools/{pool.pk}/prizes", {"name": "Kite", "stok": 3}), 422, "invalid")
    assert Pool.objects.count() == 1
    assert pool.prizes.count() == 2


def test_staff_read_a_pools_audit(make_pool, api_client):
    pool = make_pool()
    api_client().post(f"/api/pools/{pool.pk}/draw")
    body = api_client(staff=True).get(f"/api/admin/pools/{pool.pk}/audit").json()
    assert (body["ok"], body["supplied"], body["awarded"], body["stock"], body["draws"]) == (True, 20, 1, 19, 1)
    assert len(body["prizes"]) == 2


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/api/admin/pools"),
        ("patch", "/api/admin/pools/{pool}"),
        ("post", "/api/admin/pools/{pool}/prizes"),
        ("patch", "/api/admin/prizes/{prize}"),
        ("get", "/api/admin/pools/{pool}/audit"),
    ],
)
def test_staff_endpoints_refuse_buyers_and_strangers(make_pool, api_client, method, url):
    pool = make_pool()
    url = url.format(pool=pool.pk, prize=pool.prizes.first().pk)
    bodies = {
        "/api/admin/pools": pool_body(),
        f"/api/admin/pools/{pool.pk}": {"strategy": "none"},
        f"/api/admin/pools/{pool.pk}/prizes": {"name": "x", "stock": 1},
    }
    body = bodies.get(url, {"restock": 5})
    for client, status, code in ((api_client(), 403, "forbidden"), (Client(), 401, "unauthorized")):
        call = getattr(client, method)
        response = call(url, data=json.dumps(body), content_type="application/json") if method != "get" else call(url)
        assert_error(response, status, code)
    assert Pool.objects.count() == 1
    assert stock_snapshot(pool) == [(1, 1), (19, 19)]


def test_the_openapi_document_declares_every_answer_of_the_draw():
    document = Client().get("/api/openapi.json").json()
    draw = document["paths"]["/api/pools/{pool_id}/draw"]["post"]["responses"]
    assert {"201", "400", "401", "403", "404", "409"} <= set(draw)
    error = document["components"]["schemas"]["ErrorOut"]
    assert set(error["properties"]) == {"code", "message"}
