"""A title or a name needs a character that shows and holds no control character such as NUL,
in the API, the admin and the services alike (``core.names``). A title of U+200B alone read as
an empty row in every list, and one holding NUL was stored as sent."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Annotated

import pytest
from django.test import Client
from django.utils import timezone
from pydantic import Field, TypeAdapter, ValidationError

from core.errors import InvalidInput
from core.names import NAME_PATTERN, name_clean, name_problem
from core.schemas import text
from lottery.models import Pool, Prize
from lottery.services import pool_create, prize_create, prize_update
from orders.models import Voucher
from orders.services import voucher_create

from .http import assert_error, patch_json, post_json

# Zero width space, word joiner, BOM, a bidirectional mark, soft hyphen, a tag, a lone
# combining accent, Hangul filler, a no-break and an ideographic space together.
INVISIBLE = ["\u200b", "\u2060", "\ufeff", "\u200e\u200f", "\u00ad", "\U000e0041", "\u0301", "\u3164", "\u00a0\u3000"]
HOLDING_NUL = ["Gift\x00card", "\x00", "Gift\x07"]
# Bidirectional controls beside characters that show: each would reorder the title as drawn.
HOLDING_BIDI = [
    "Gift\u202egnp.exe",
    "\u202aA\u202c",
    "A\u202bB",
    "A\u202dB",
    "A\u2066B\u2069",
    "A\u2067B",
    "A\u2068B",
    "Sale\u200e",
    "Sale\u200f!",
    "\u061cSale",
]
REFUSED = INVISIBLE + HOLDING_NUL + HOLDING_BIDI


def window() -> dict:
    begin = timezone.now() + timedelta(hours=1)
    return {"begin_at": begin.isoformat(), "end_at": (begin + timedelta(hours=1)).isoformat()}


def test_the_documents_pattern_is_the_services_rule_for_every_character():
    # What the API checks (pydantic, with the pattern the document gives) and what the
    # services check agree on each code point, the planes the pattern is built from and the
    # others alike.
    api = TypeAdapter(text(200))
    chars = [chr(code) for code in range(sys.maxunicode + 1) if not 0xD800 <= code <= 0xDFFF]
    services_refused = {char for char in chars if name_problem(char) is not None}
    assert len(services_refused) > 2000
    # The pattern alone, as a client reading the document applies it, and the API's type.
    for checked in (Annotated[str, Field(pattern=NAME_PATTERN)], text(200)):
        # One call for them all: pydantic says which items it refused.
        with pytest.raises(ValidationError) as refused:
            TypeAdapter(list[checked]).validate_python(chars)
        assert {chars[error["loc"][0]] for error in refused.value.errors()} == services_refused
    for name in ["Gift card", " Gift ", "\ufeffA", "e\u0301", "\u200bA\u200b", "A\tB"]:
        assert name_problem(name.strip()) is None
        assert api.validate_python(name) == name
    for name in REFUSED:
        assert name_problem(name.strip()) is not None
        with pytest.raises(ValidationError):
            api.validate_python(name)


def test_the_document_says_the_rule(client: Client):
    schemas = client.get("/api/openapi.json").json()["components"]["schemas"]
    assert schemas["VoucherCreateIn"]["properties"]["title"]["pattern"] == NAME_PATTERN
    assert schemas["PoolCreateIn"]["properties"]["name"]["pattern"] == NAME_PATTERN
    assert schemas["PrizeCreateIn"]["properties"]["name"]["pattern"] == NAME_PATTERN


@pytest.mark.django_db
@pytest.mark.parametrize("name", REFUSED)
def test_the_api_refuses_an_invisible_name_or_one_holding_nul(api_client, make_pool, name):
    staff = api_client(staff=True)
    pool = make_pool()
    prize = pool.prizes.first()
    responses = [
        post_json(staff, "/api/admin/vouchers", {"title": name, "stock": 1, **window()}),
        post_json(staff, "/api/admin/pools", {"name": name, "draws_per_user": 1, "no_prize_weight": 0, **window()}),
        post_json(staff, f"/api/admin/pools/{pool.pk}/prizes", {"name": name, "stock": 1}),
        patch_json(staff, f"/api/admin/prizes/{prize.pk}", {"name": name}),
    ]
    for response in responses:
        assert_error(response, 422, "invalid")
    assert not Voucher.objects.exists()
    assert list(Pool.objects.values_list("name", flat=True)) == ["Test pool"]
    assert Prize.objects.get(pk=prize.pk).name == prize.name


@pytest.mark.django_db
def test_the_api_names_the_field_and_the_bidirectional_control_it_refuses(api_client, make_voucher, make_pool):
    staff = api_client(staff=True)
    prize = make_pool().prizes.first()
    answers = {
        "title": post_json(staff, "/api/admin/vouchers", {"title": "Gift\u202egnp.exe", "stock": 1, **window()}),
        "name": patch_json(staff, f"/api/admin/prizes/{prize.pk}", {"name": "Gold\u2066!\u2069"}),
    }
    for field, response in answers.items():
        assert_error(response, 422, "invalid")
        assert f"{field}: must not hold a bidirectional control character" in response.json()["message"]
    # The changes of a voucher or a pool take no title or name at all.
    voucher = make_voucher(title="Kept")
    assert_error(patch_json(staff, f"/api/admin/vouchers/{voucher.pk}", {"title": "A\u202eB"}), 422, "invalid")
    assert Voucher.objects.get(pk=voucher.pk).title == "Kept"


@pytest.mark.django_db
@pytest.mark.parametrize("name", REFUSED)
def test_the_services_refuse_an_invisible_name_or_one_holding_nul(make_pool, name):
    begin = timezone.now()
    pool = make_pool()
    prize = pool.prizes.first()
    calls = [
        lambda: voucher_create(title=name, stock=1, begin_at=begin, end_at=begin + timedelta(hours=1), strategy="none"),
        lambda: pool_create(
            name=name,
            begin_at=begin,
            end_at=begin + timedelta(hours=1),
            draws_per_user=1,
            no_prize_weight=0,
            strategy="none",
        ),
        lambda: prize_create(pool=pool, name=name, stock=1),
        lambda: prize_update(prize=prize, name=name),
    ]
    for call in calls:
        with pytest.raises(InvalidInput):
            call()
    assert name_clean(" Kite ") == "Kite"


def _window_form(**fields) -> dict:
    begin = timezone.now()
    end = begin + timedelta(days=1)
    return {
        "description": "",
        "begin_at_0": begin.strftime("%Y-%m-%d"),
        "begin_at_1": begin.strftime("%H:%M:%S"),
        "end_at_0": end.strftime("%Y-%m-%d"),
        "end_at_1": end.strftime("%H:%M:%S"),
        "strategy": "db_atomic",
        **fields,
    }


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["\u200b", "\u2060\ufeff", "Gift\x00card", "Gift\u202egnp.exe", "A\u2067B"])
def test_the_admin_refuses_an_invisible_name_or_one_holding_nul(admin_client_, make_voucher, make_pool, name):
    voucher = make_voucher(title="Kept")
    for url in ("/admin/orders/voucher/add/", f"/admin/orders/voucher/{voucher.pk}/change/"):
        response = admin_client_.post(url, _window_form(title=name, initial_stock="3"))
        assert response.status_code == 200
        assert list(response.context["adminform"].form.errors) == ["title"]
    assert list(Voucher.objects.values_list("title", flat=True)) == ["Kept"]

    prizes = {"prizes-TOTAL_FORMS": "0", "prizes-INITIAL_FORMS": "0", "prizes-MIN_NUM_FORMS": "0"}
    pool_fields = {"draws_per_user": "1", "no_prize_weight": "0", **prizes}
    response = admin_client_.post("/admin/lottery/pool/add/", _window_form(name=name, **pool_fields))
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == ["name"]

    pool = make_pool()
    prize_form = {
        "prizes-TOTAL_FORMS": "1",
        "prizes-0-name": name,
        "prizes-0-description": "",
        "prizes-0-value": "1.00",
        "prizes-0-initial_stock": "2",
    }
    response = admin_client_.post(
        f"/admin/lottery/pool/{pool.pk}/change/", _window_form(name="Test pool", **(pool_fields | prize_form))
    )
    assert response.status_code == 200
    assert response.context["inline_admin_formsets"][0].formset.errors[0].keys() == {"name"}
    assert sorted(Prize.objects.filter(pool=pool).values_list("name", flat=True)) == ["Gold", "Silver"]
