"""What the API takes is what its OpenAPI document says, no more and no less (findings of
the contract test, tests/test_api_contract.py):

- a time is an RFC 3339 date-time string (``format: date-time``): pydantic alone also took
  ``0`` and ``"1700000000"`` (seconds since 1970) and a space for the T;
- a count is a JSON Schema integer: ``5.0`` is 5, while ``"5"`` and ``true`` are not;
- an amount of money is a whole number or a string with at most 2 decimals, as documented:
  the document said "any string", and floats with cents cannot be told apart from their
  rounding errors;
- a title or a name needs a character that is not whitespace (the services strip it);
- a token's id in the path is a number, or the path is not there (404, as every other id).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from .http import assert_error, patch_json, post_json

pytestmark = pytest.mark.django_db


def window(**overrides) -> dict:
    begin = timezone.now() + timedelta(hours=1)
    return {"begin_at": begin.isoformat(), "end_at": (begin + timedelta(hours=1)).isoformat(), **overrides}


@pytest.mark.parametrize("moment", [0, 1700000000, "0", "1700000000", "2030-01-01 10:00:00Z", "2030-01-01T10:00Z"])
def test_a_time_that_is_not_an_rfc3339_date_time_is_refused(api_client, moment):
    body = {"title": "Odd time", "stock": 3, **window(begin_at=moment)}
    response = post_json(api_client(staff=True), "/api/admin/vouchers", body)
    assert_error(response, 422, "invalid")
    assert "begin_at" in response.json()["message"]
    assert "RFC 3339" in response.json()["message"]


@pytest.mark.parametrize("moment", ["2030-01-01T10:00:00Z", "2030-01-01t10:00:00.123456z", "2030-01-01T12:00:00+02:00"])
def test_an_rfc3339_date_time_is_taken_in_utc(api_client, moment):
    body = {"title": "Good time", "stock": 3, **window(begin_at=moment, end_at="2031-01-01T00:00:00Z")}
    response = post_json(api_client(staff=True), "/api/admin/vouchers", body)
    assert response.status_code == 201, response.content
    assert response.json()["begin_at"].startswith("2030-01-01T10:00:00")


def test_a_count_written_as_a_whole_float_is_that_count(api_client, make_voucher):
    staff = api_client(staff=True)
    created = post_json(staff, "/api/admin/vouchers", {"title": "Floaty", "stock": 5.0, **window()})
    assert created.status_code == 201, created.content
    assert created.json()["stock"] == 5
    restocked = patch_json(staff, f"/api/admin/vouchers/{created.json()['id']}", {"restock": 2.0})
    assert restocked.json()["stock"] == 7


@pytest.mark.parametrize("stock", ["5", True, 5.5, None])
def test_a_count_that_is_not_an_integer_is_refused(api_client, stock):
    response = post_json(api_client(staff=True), "/api/admin/vouchers", {"title": "Odd", "stock": stock, **window()})
    assert_error(response, 422, "invalid")
    assert "stock" in response.json()["message"]


@pytest.mark.parametrize(
    ("value", "stored"),
    [("9.50", "9.50"), ("9", "9.00"), (9, "9.00"), (9.0, "9.00"), ("9999999999.99", "9999999999.99")],
)
def test_an_amount_is_a_whole_number_or_a_string_with_cents(api_client, make_pool, value, stored):
    pool = make_pool()
    body = {"name": "Kite", "stock": 1, "value": value}
    response = post_json(api_client(staff=True), f"/api/admin/pools/{pool.pk}/prizes", body)
    assert response.status_code == 201, response.content
    assert response.json()["value"] == stored


@pytest.mark.parametrize("value", [9.5, "", "9.505", ".5", "9,50", "1e3", " 9", "10000000000", 10_000_000_000, True])
def test_an_amount_the_document_does_not_describe_is_refused(api_client, make_pool, value):
    pool = make_pool()
    staff = api_client(staff=True)
    created = post_json(staff, f"/api/admin/pools/{pool.pk}/prizes", {"name": "Kite", "stock": 1, "value": value})
    assert_error(created, 422, "invalid")
    prize = pool.prizes.first()
    updated = patch_json(staff, f"/api/admin/prizes/{prize.pk}", {"value": value})
    assert_error(updated, 422, "invalid")


def test_a_token_id_that_is_not_a_number_is_not_a_path_of_the_api(api_client):
    response = api_client().delete("/api/auth/tokens/abc")
    assert_error(response, 404, "not_found")


@pytest.mark.parametrize("blank", ["\t", "   ", "\x1c", "\u3000\u2001", "\x85"])
def test_a_blank_name_is_refused_by_its_field_as_the_document_says(api_client, make_pool, blank):
    staff = api_client(staff=True)
    pool = make_pool()
    responses = [
        post_json(staff, "/api/admin/vouchers", {"title": blank, "stock": 1, **window()}),
        post_json(staff, "/api/admin/pools", {"name": blank, "draws_per_user": 1, "no_prize_weight": 0, **window()}),
        post_json(staff, f"/api/admin/pools/{pool.pk}/prizes", {"name": blank, "stock": 1}),
        patch_json(staff, f"/api/admin/prizes/{pool.prizes.first().pk}", {"name": blank}),
    ]
    for field, response in zip(["title", "name", "name", "name"], responses, strict=True):
        assert_error(response, 422, "invalid")
        # In words, not the document's pattern thousands of characters long.
        assert f"{field}: needs a character that shows" in response.json()["message"]


def test_a_name_with_a_character_that_python_does_not_strip_is_kept(api_client):
    response = post_json(api_client(staff=True), "/api/admin/vouchers", {"title": " \ufeffA ", "stock": 1, **window()})
    assert response.status_code == 201, response.content
    assert response.json()["title"] == "\ufeffA"
