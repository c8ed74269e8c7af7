"""A request whose failure may have done what it asked all the same (``core.outage.
outcome_unknown``) answers 503, and its ``Idempotency-Key`` then answers 409
``idempotency_interrupted``: let go as the 503 of a dependency out of reach is, the key let a
resend take a second time."""

from __future__ import annotations

import pytest
import redis
from django.db import OperationalError, connection
from django.test import Client

from core.outage import outcome_unknown
from inventory.items import reservation_takes
from inventory.redis_lua.client import Reservations
from lottery import product as lottery_product
from orders.models import Order

from .cuts import cut_after
from .http import assert_error

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reservations_redis", "idempotency_keys"),
]

KEY = "5b0e7c1d-2a3f-4b6c-8d9e-0f1a2b3c4d5e"


def send(client: Client, url: str):
    return client.post(url, headers={"Idempotency-Key": KEY})


def test_a_draw_reserved_whose_prize_the_database_could_not_name_is_not_drawn_again(api_client, make_pool, monkeypatch):
    """Under ``redis_lua`` the draw is reserved, and its answer then names the prize from the
    database, out of reach here: 503. Sent again under its key, it drew a second time."""
    pool = make_pool(prizes=(("Gold", 5),), draws_per_user=3, strategy="redis_lua")
    player = api_client()

    def unreachable(*, stock_id):
        raise OperationalError(2003, "Can't connect to server on '127.0.0.1'")

    monkeypatch.setattr(lottery_product, "prize_for_stock", unreachable)
    first = send(player, f"/api/pools/{pool.pk}/draw")
    assert_error(first, 503, "unavailable")
    monkeypatch.undo()
    assert_error(send(player, f"/api/pools/{pool.pk}/draw"), 409, "idempotency_interrupted")
    assert reservation_takes(group_id=pool.group_id, user_id=player.user.pk) == 1


def test_a_purchase_whose_database_connection_was_cut_at_its_commit_is_not_made_again(api_client, make_voucher):
    """The connection killed as the order is written, before its COMMIT: whether the COMMIT went
    through is unknown to the server, which answers 503. Sent again under its key, it bought."""
    voucher = make_voucher(stock=5, strategy="db_atomic")
    buyer = api_client()

    with connection.execute_wrapper(cut_after("INSERT INTO `orders_order`")):
        assert_error(send(buyer, f"/api/vouchers/{voucher.pk}/purchase"), 503, "unavailable")
    connection.close()
    assert_error(send(buyer, f"/api/vouchers/{voucher.pk}/purchase"), 409, "idempotency_interrupted")
    assert not Order.objects.filter(voucher=voucher).exists()  # rolled back: the client looks, and tries anew


def test_a_draw_whose_redis_timed_out_after_its_script_ran_is_not_drawn_again(api_client, make_pool, monkeypatch):
    """RESERVE ran, and its answer was lost to a timeout: 503 ``unavailable``, raised as a
    refusal (``REACHABLE``) where the database's cut is an error; its key was let go too."""
    pool = make_pool(prizes=(("Gold", 5),), draws_per_user=3, strategy="redis_lua")
    player = api_client()
    reserve = Reservations.reserve

    def answer_lost(self, **options):
        reserve(self, **options)
        raise redis.TimeoutError("Timeout reading from 127.0.0.1:6379")

    monkeypatch.setattr(Reservations, "reserve", answer_lost)
    assert_error(send(player, f"/api/pools/{pool.pk}/draw"), 503, "unavailable")
    monkeypatch.undo()
    assert_error(send(player, f"/api/pools/{pool.pk}/draw"), 409, "idempotency_interrupted")
    assert reservation_takes(group_id=pool.group_id, user_id=player.user.pk) == 1


def test_a_failure_to_connect_did_nothing_and_a_cut_or_a_lost_answer_may_have():
    assert not outcome_unknown(redis.TimeoutError("Timeout connecting to server"))
    assert not outcome_unknown(OperationalError(2013, "Lost connection at 'reading initial communication packet'"))
    assert not outcome_unknown(OperationalError(2003, "Can't connect to server on '127.0.0.1'"))
    assert outcome_unknown(redis.TimeoutError("Timeout reading from 127.0.0.1:6379"))
    assert outcome_unknown(OperationalError(2013, "Lost connection to server during query"))
