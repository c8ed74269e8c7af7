"""Times that parse but cannot be stored: every staff call that takes a window answers them
422 ``invalid`` and writes nothing.

``0001-01-01T00:00:00+14:00`` is a valid ISO 8601 time whose UTC instant falls before year 1;
converting it to UTC (for the comparison of begin and end, and for the database) raised
OverflowError, answered 500.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone
from pydantic import TypeAdapter, ValidationError

from core.errors import InvalidInput
from core.schemas import UtcDatetime
from inventory.models import Stock
from lottery.models import Pool
from lottery.services import pool_create
from orders.models import Voucher
from orders.services import voucher_create

from .http import assert_error, patch_json, post_json

pytestmark = pytest.mark.django_db

OUT_OF_RANGE = [
    "0001-01-01T00:00:00+14:00",  # before year 1 in UTC
    "9999-12-31T23:59:59-14:00",  # after year 9999 in UTC
    "0500-06-01T00:00:00+00:00",  # in range for Python, not for MySQL's DATETIME (1000-9999)
]


def window_body(**overrides) -> dict:
    begin = timezone.now() + timedelta(hours=1)
    return {"begin_at": begin.isoformat(), "end_at": (begin + timedelta(hours=1)).isoformat(), **overrides}


def staff(api_client) -> Client:
    return api_client(staff=True)


@pytest.mark.parametrize("field", ["begin_at", "end_at"])
@pytest.mark.parametrize("moment", OUT_OF_RANGE)
def test_voucher_create_refuses_a_time_out_of_range(api_client, field, moment):
    body = {"title": "Far", "stock": 3, "strategy": "db_atomic", **window_body(**{field: moment})}
    response = post_json(staff(api_client), "/api/admin/vouchers", body)
    assert_error(response, 422, "invalid")
    assert field in response.json()["message"]
    assert not Voucher.objects.exists()
    assert not Stock.objects.exists()


@pytest.mark.parametrize("field", ["begin_at", "end_at"])
@pytest.mark.parametrize("moment", OUT_OF_RANGE)
def test_voucher_update_refuses_a_time_out_of_range(api_client, make_voucher, field, moment):
    voucher = make_voucher()
    before = (voucher.begin_at, voucher.end_at)
    response = patch_json(staff(api_client), f"/api/admin/vouchers/{voucher.pk}", {field: moment})
    assert_error(response, 422, "invalid")
    voucher.refresh_from_db()
    assert (voucher.begin_at, voucher.end_at) == before


@pytest.mark.parametrize("field", ["begin_at", "end_at"])
@pytest.mark.parametrize("moment", OUT_OF_RANGE)
def test_pool_create_refuses_a_time_out_of_range(api_client, field, moment):
    body = {"name": "Far", "draws_per_user": 1, "no_prize_weight": 0, "strategy": "db_atomic"}
    response = post_json(staff(api_client), "/api/admin/pools", {**body, **window_body(**{field: moment})})
    assert_error(response, 422, "invalid")
    assert not Pool.objects.exists()


@pytest.mark.parametrize("field", ["begin_at", "end_at"])
@pytest.mark.parametrize("moment", OUT_OF_RANGE)
def test_pool_update_refuses_a_time_out_of_range(api_client, make_pool, field, moment):
    pool = make_pool()
    before = (pool.begin_at, pool.end_at)
    response = patch_json(staff(api_client), f"/api/admin/pools/{pool.pk}", {field: moment})
    assert_error(response, 422, "invalid")
    pool.refresh_from_db()
    assert (pool.begin_at, pool.end_at) == before


def test_times_at_the_edges_of_the_range_are_taken_and_kept_in_utc(api_client):
    body = {
        "title": "Long",
        "stock": 1,
        "strategy": "db_atomic",
        "begin_at": "1000-01-01T00:00:00+00:00",
        "end_at": "9999-12-31T09:59:59-14:00",
    }
    response = post_json(staff(api_client), "/api/admin/vouchers", body)
    assert response.status_code == 201, response.content
    voucher = Voucher.objects.get(pk=response.json()["id"])
    assert voucher.begin_at == datetime(1000, 1, 1, tzinfo=UTC)
    assert voucher.end_at == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def test_the_shared_type_converts_to_utc_and_refuses_naive_and_out_of_range_times():
    adapter = TypeAdapter(UtcDatetime)
    assert adapter.validate_python("2026-03-01T12:00:00+02:00") == datetime(2026, 3, 1, 10, tzinfo=UTC)
    for bad in ["2026-03-01T12:00:00", *OUT_OF_RANGE]:
        with pytest.raises(ValidationError):
            adapter.validate_python(bad)


def test_the_services_refuse_a_window_out_of_range_from_any_caller():
    far_east = timezone.get_fixed_timezone(14 * 60)
    begin_at = datetime(1, 1, 1, tzinfo=far_east)
    with pytest.raises(InvalidInput, match="begin_at"):
        voucher_create(title="Far", stock=1, begin_at=begin_at, end_at=timezone.now(), strategy="db_atomic")
    with pytest.raises(InvalidInput, match="begin_at"):
        pool_create(
            name="Far",
            begin_at=begin_at,
            end_at=timezone.now(),
            draws_per_user=1,
            no_prize_weight=0,
            strategy="db_atomic",
        )
    assert not Voucher.objects.exists()
    assert not Pool.objects.exists()
