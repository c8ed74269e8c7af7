"""The load runs' own items (unlisted): only the load crowd buys or draws them, by id or not."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.services import users_retire, users_with_tokens_create
from inventory.admission.keys import RoomKeys
from loadtests.products import PRODUCTS, Supply
from lottery.models import Draw, Pool
from orders.models import Order, Voucher

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
    # Staff, who see the item, hear why; anyone else what an id of nothing answers.
    response = api_client(staff=True).post(path.format(target.pk))
    assert response.status_code == 403, response.content
    assert response.json()["code"] == code
    outsider = api_client()
    response, missing = outsider.post(path.format(target.pk)), outsider.post(path.format(target.pk + 1000))
    assert (response.status_code, response.content) == (missing.status_code, missing.content)
    assert response.status_code == 404
    assert not Order.objects.exists() and not Draw.objects.exists()


@pytest.mark.parametrize("product", ["voucher", "pool"])
def test_the_crowd_buys_and_draws_until_it_is_retired(product):
    target = lab_item(product, "db_atomic")
    path, _ = ACTIONS[product]
    (_, first), (_, second) = users_with_tokens_create(count=2, prefix="lab999")
    assert bearer(first).post(path.format(target.pk)).status_code == 201
    users_retire(username_prefix="lab999-")
    assert bearer(second).post(path.format(target.pk)).status_code == 401  # its token revoked


def test_a_page_buy_of_an_unlisted_voucher_is_as_of_a_missing_one(client, make_user):
    target = lab_item("voucher", "db_atomic")
    client.force_login(make_user())
    assert client.post(f"/vouchers/{target.pk}/buy").status_code == 404
    assert client.post(f"/vouchers/{target.pk + 1000}/buy").status_code == 404
    assert not Order.objects.exists()


BUTTONS = {"voucher": ("/vouchers/{}/buy", "/vouchers/{}/queue"), "pool": ("/pools/{}/draw", "/pools/{}/queue")}


@pytest.mark.parametrize("product", ["voucher", "pool"])
def test_an_unlisted_items_buttons_answer_an_outsider_as_a_missing_ids_do(client, make_user, product, rooms):
    """Logged in or not: the take's button and the Join button of a waiting room. Before,
    anyone could find the items by the login fragment (200 against 404) and the Join's 204,
    and a logged-in outsider joined the item's room."""
    target = lab_item(product, "db_atomic")
    MODELS[product].objects.filter(pk=target.pk).update(admission="queue")
    signed_in = Client()
    signed_in.force_login(make_user())
    for outsider in (Client(), signed_in):
        for button in BUTTONS[product]:
            seen, missing = outsider.post(button.format(target.pk)), outsider.post(button.format(target.pk + 1000))
            assert (seen.status_code, missing.status_code) == (404, 404), button
    assert not rooms.exists(*RoomKeys.of(product, target.pk).all)
    assert not Order.objects.exists() and not Draw.objects.exists()


MODELS = {"voucher": Voucher, "pool": Pool}
READS = {
    "voucher": ["/api/vouchers/{}", "/vouchers/{}/", "/vouchers/{}/live"],
    "pool": ["/api/pools/{}", "/pools/{}/", "/pools/{}/odds", "/pools/{}/standing"],
}


def answers(client: Client, product: str, item_id: int) -> list[tuple[int, bytes]]:
    responses = [client.get(path.format(item_id)) for path in READS[product]]
    return [(response.status_code, response.content) for response in responses]


@pytest.mark.parametrize("product", ["voucher", "pool"])
def test_an_unlisted_item_is_as_missing_to_anyone_but_staff_and_the_crowd(client, api_client, make_user, product):
    target = lab_item(product, "db_atomic")
    client.force_login(make_user())
    for outsider in (Client(), client, api_client()):
        seen, missing = answers(outsider, product, target.pk), answers(outsider, product, target.pk + 1000)
        # The answer to an id of nothing, so that trying ids finds nothing: the API's body to
        # the byte, the pages' status (a page holds a fresh CSRF token each time).
        assert [status for status, _ in seen] == [status for status, _ in missing] == [404] * len(READS[product])
        assert seen[0] == missing[0]
        assert not any(f"lab {product}".encode() in body for _, body in seen)
    staff = Client()
    staff.force_login(make_user(staff=True))
    [(_, member)] = users_with_tokens_create(count=1, prefix="lab998")
    assert {status for status, _ in answers(staff, product, target.pk)} == {200}
    # Tokens, staff's and the crowd's, open the API (the pages know sessions only).
    for insider in (api_client(staff=True), bearer(member)):
        assert insider.get(READS[product][0].format(target.pk)).status_code == 200
    listed = lab_item(product, "db_atomic")
    MODELS[product].objects.filter(pk=listed.pk).update(listed=True)
    assert {status for status, _ in answers(Client(), product, listed.pk)} == {200}
