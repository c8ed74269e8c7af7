"""Refusals instead of server errors, found by the API's contract test
(tests/test_api_contract.py) and by reading the code paths it covers:

- an item under ``redlock`` on a server given no Redlock servers (``LOCK_REDIS_URLS``, which
  the compose stack does not set) answers 503 ``unavailable`` with Retry-After, as while its
  servers are down, not 500;
- a restock that would take a row past ``MAX_UNITS`` supplied is refused (409
  ``supply_limit``) and writes nothing: 22 of the largest restocks overflowed the integer
  column (a 500).
"""

from __future__ import annotations

import pytest

from inventory.services import MAX_UNITS
from orders.models import Order
from tests.stock import stock_supplied

from .http import assert_error, patch_json

pytestmark = pytest.mark.django_db


def test_a_redlock_item_on_a_server_without_redlock_servers_answers_503(api_client, make_voucher, make_pool, settings):
    settings.LOCK_REDIS_URLS = []
    voucher = make_voucher(strategy="redlock")
    pool = make_pool(strategy="redlock")
    client = api_client()

    bought = client.post(f"/api/vouchers/{voucher.pk}/purchase")
    drawn = client.post(f"/api/pools/{pool.pk}/draw")

    for response in (bought, drawn):
        assert_error(response, 503, "unavailable")
        assert "LOCK_REDIS_URLS" in response.json()["message"]
        assert int(response["Retry-After"]) > 0
    assert not Order.objects.filter(voucher=voucher).exists()
    assert not pool.draws.exists()


def test_a_restock_past_the_supply_limit_is_refused_and_writes_nothing(api_client, make_voucher, make_pool):
    staff = api_client(staff=True)
    voucher = make_voucher(stock=MAX_UNITS - 5)
    prize = make_pool(prizes=(("Gold", MAX_UNITS - 1),)).prizes.get()

    assert patch_json(staff, f"/api/admin/vouchers/{voucher.pk}", {"restock": 5}).json()["stock"] == MAX_UNITS
    refused = [
        patch_json(staff, f"/api/admin/vouchers/{voucher.pk}", {"restock": 1}),
        patch_json(staff, f"/api/admin/prizes/{prize.pk}", {"restock": 2, "name": "Platinum"}),
    ]

    for response in refused:
        assert_error(response, 409, "supply_limit")
    assert stock_supplied(voucher) == MAX_UNITS
    prize.refresh_from_db()
    assert (prize.name, prize.stock.initial_quantity) == ("Gold", MAX_UNITS - 1)
