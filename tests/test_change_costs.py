"""What a cancel, a pay and a claim cost in queries, pinned so that they cannot grow back:
the caller's record is read once, with its item, by the view's selector (``order_get``,
``draw_get``), and the service acts on it as read (``inventory.holds``): it reads neither the
record again by its id, nor its item, nor the unit it took. Through the API and through the
pages' buttons alike, which make the change by the same call (``inventory.api.ChangeCall``).

Before the services took the record, a cancel through the API made 10 queries, a pay 16 and
a claim 6 (the pages 15, 19 and 9)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from lottery.models import Pool
from lottery.selectors import draw_get
from lottery.services import draw_claim
from orders.models import Voucher
from orders.selectors import order_get
from orders.services import order_cancel
from payments.services import order_pay

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("payment_provider")]


@pytest.fixture(autouse=True)
def revocations_read_once(settings):
    """The bearer token's revocations are read by the record's take, not again inside the
    measured request, however slowly the machine gets there."""
    settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS = 3600


# The queries of each change given the record as read, by what makes them:
#   cancel: the group's takes past the rule (whether the release keeps their totals), and
#       the guarded release: savepoint, the stock row locked, the order, the user's count of
#       abandoned holds (one upsert), the stock, release.
#   pay: the payment and the provider's charge, with the order read again past the
#       one-open-payment guard (savepoint, insert, status, insert, release); its confirmation
#       at once: savepoint, the payment locked, the guarded settle (savepoint, update,
#       release), the payment, release.
#   claim: the guarded settle: savepoint, update, release.
SERVICE = {"cancel": 7, "pay": 12, "claim": 3}
# The API's request adds the record's one read (the bearer token reads nothing).
API = {action: count + 1 for action, count in SERVICE.items()}
# A page's adds the session and its user, and the fragment's reads of what it shows: a
# cancelled order's payments, for a refund and for one on its way (``orders.views``).
PAGE = {"cancel": API["cancel"] + 2 + 2, "pay": API["pay"] + 2, "claim": API["claim"] + 2}

API_PATHS = {"cancel": "/api/orders/{}/cancel", "pay": "/api/orders/{}/pay", "claim": "/api/draws/{}/claim"}
PAGE_PATHS = {"cancel": "/orders/{}/cancel", "pay": "/orders/{}/pay", "claim": "/draws/{}/claim"}


@pytest.fixture
def held(make_voucher, make_pool, api_client):
    """``held(action)``: a buyer's API client and the id of their record held for ``action``."""

    def make(action: str) -> tuple[Client, int]:
        client = api_client()
        if action == "claim":
            pool = make_pool(prizes=(("Gold", 5),))
            Pool.objects.filter(pk=pool.pk).update(hold_seconds=900)
            answer = client.post(f"/api/pools/{pool.pk}/draw")
        else:
            voucher = make_voucher()
            Voucher.objects.filter(pk=voucher.pk).update(hold_seconds=900)
            answer = client.post(f"/api/vouchers/{voucher.pk}/purchase")
        assert answer.status_code == 201, answer.content
        body = answer.json()
        assert body["status"] == "held", body
        return client, body["draw_id" if action == "claim" else "order_id"]

    return make


def queries(call) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        call()
    return [query["sql"] for query in captured.captured_queries]


@pytest.mark.parametrize("action", ["cancel", "pay", "claim"])
def test_a_service_acts_on_the_record_as_read(held, action):
    client, record_id = held(action)
    user = client.user
    record = draw_get(user=user, draw_id=record_id) if action == "claim" else order_get(user=user, order_id=record_id)
    change = {"cancel": order_cancel, "pay": order_pay, "claim": draw_claim}[action]

    made = queries(lambda: change(**{"draw" if action == "claim" else "order": record}))

    assert len(made) == SERVICE[action], "\n".join(made)
    # Neither the item nor the unit is read: they came with the record.
    assert not [sql for sql in made if "FROM `orders_voucher`" in sql or "FROM `lottery_pool`" in sql], made
    assert record.status == {"cancel": "cancelled", "pay": "paid", "claim": "claimed"}[action]


@pytest.mark.parametrize("action", ["cancel", "pay", "claim"])
def test_a_change_through_the_api_reads_its_record_once(held, action):
    client, record_id = held(action)

    made = queries(lambda: client.post(API_PATHS[action].format(record_id)))

    assert len(made) == API[action], "\n".join(made)


@pytest.mark.parametrize("action", ["cancel", "pay", "claim"])
def test_a_change_through_a_page_costs_what_the_api_does_and_the_fragment(held, action):
    client, record_id = held(action)
    page = Client()
    page.force_login(client.user)

    made = queries(lambda: page.post(PAGE_PATHS[action].format(record_id)))

    assert len(made) == PAGE[action], "\n".join(made)
