"""What the payments' tests share: a voucher that holds its orders for payment, a buyer's
order of it, and the provider's signed callback sent as the provider sends it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from core.namespace import key_prefix
from locking.integration import locks_redis
from orders.models import Order, Voucher
from orders.selectors import voucher_get
from payments.signature import HEADER, callback_sign
from tests.records import answered_row


@pytest.fixture(autouse=True)
def unapplied_from_the_first():
    """The beat's unapplied confirmations start at the first waiting payment: where an earlier
    test's run stopped names ids of another database's."""
    locks_redis().delete(f"{key_prefix()}payments:unapplied:after")


@pytest.fixture
def held_voucher(make_voucher) -> Callable[..., Voucher]:
    """A live voucher whose orders are held ``window`` seconds for their payment."""

    def make(*, window: int = 600, stock: int = 5, strategy: str = "db_atomic", **fields) -> Voucher:
        voucher = make_voucher(stock=stock, strategy=strategy, **fields)
        Voucher.objects.filter(pk=voucher.pk).update(hold_seconds=window)
        return voucher_get(voucher_id=voucher.pk)

    return make


def buy(client: Client, voucher: Voucher) -> int:
    """The id of the caller's new order of ``voucher``, held."""
    answer = client.post(f"/api/vouchers/{voucher.pk}/purchase")
    assert answer.status_code in (201, 202), answer.content
    return answer.json()["order_id"]


def pay(client: Client, order_id: int, **headers: str):
    return client.post(f"/api/orders/{order_id}/pay", headers=headers)


def callback(reference: str, *, signature: str | None = None, body: bytes | None = None):
    """The provider's confirmation of ``reference``, signed unless ``signature`` says otherwise."""
    body = body if body is not None else json.dumps({"reference": reference, "status": "confirmed"}).encode()
    headers = {HEADER: callback_sign(body) if signature is None else signature}
    return Client().post("/api/payments/callback", data=body, content_type="application/json", headers=headers)


def order_row(order_id: int) -> Order:
    """The order the API calls ``order_id`` (``Record.public_id``)."""
    return answered_row(Order, order_id)


def held_until_past(order_id: int) -> Order:
    """Move the order's deadline into the past, as time would."""
    order = order_row(order_id)
    Order.objects.filter(pk=order.pk).update(hold_until=timezone.now() - timedelta(seconds=1))
    order.refresh_from_db()
    return order
