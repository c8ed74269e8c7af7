"""The load runs' own items (unlisted): only the load crowd buys or draws them, by id or not."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.services import users_retire, users_with_tokens_create
from loadtests.products import PRODUCTS, Supply
from lottery.models import Draw
from orders.models import Order

pytestmark = pytest.mark.django_db

ACTIONS = {"voucher": ("/api/vouchers/{}/purchase", "not_for_sale"), "pool": ("/api/pools/{}/draw", "not_open")}


def lab_item(product: str, strategy: str):
    supply = Supply(stock=5, prizes=1, draws_per_user=3)
    return PRODUCTS[product].create(title=f"lab {product} {strategy}", strategy=strategy, supply=supply)


def bearer(token: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize("product", ["voucher", "pool"])
@pytest.mark.parametrize("strategy", ["db_atomic", "redis_lua"])
def test_an_unlisted_item_is_refused_to_anyone_but_the_crowd(api_client, product, strategy):
    target = lab_item(product, strategy)
    path, code = ACTIONS[product]
    for outsider in (api_client(), api_client(staff=True)):
        response = outsider.post(path.format(target.pk))
        assert response.status_code == 403, response.content
        assert response.json()["code"] == code
    assert not Order.objects.exists() and not Draw.objects.exists()


@pytest.mark.parametrize("product", ["voucher", "pool"])
def test_the_crowd_buys_and_draws_until_it_is_retired(product):
    target = lab_item(product, "db_atomic")
    path, _ = ACTIONS[product]
    (_, first), (_, second) = users_with_tokens_create(count=2, prefix="lab999")
    assert bearer(first).post(path.format(target.pk)).status_code == 201
    users_retire(username_prefix="lab999-")
    assert bearer(second).post(path.format(target.pk)).status_code == 401  # its token revoked


def test_a_page_buy_of_an_unlisted_voucher_is_refused(client, make_user):
    target = lab_item("voucher", "db_atomic")
    client.force_login(make_user())
    page = client.post(f"/vouchers/{target.pk}/buy").content.decode()
    assert 'data-outcome="not_for_sale"' in page
    assert not Order.objects.exists()
