"""The waiting room runs on Redis' clock, on the real Redis: a web process whose own clock runs
ahead of the others' neither drops their live tickets, nor hands out longer deadlines, nor
refuses a ticket still live (``inventory.admission.scripts``)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from inventory.admission.room import room_enter, ticket_held
from inventory.take import item_take
from orders.product import VOUCHER
from orders.selectors import voucher_get

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("rooms", "reservations_redis"),
]

# How far ahead the skewed process's clock runs: well past a ticket's lifetime, well within the sale.
AHEAD = timedelta(minutes=10)
TICKET_SECONDS = 60


@pytest.fixture
def queued(make_voucher):
    def make(*, strategy: str = "db_atomic"):
        voucher = make_voucher(
            stock=5,
            strategy=strategy,
            admission="queue",
            admission_rate=1000.0,
            admission_ticket_seconds=TICKET_SECONDS,
        )
        return voucher_get(voucher_id=voucher.pk)

    return make


@contextmanager
def clock_ahead():
    """Within it, this process's clock (``time.time``) runs :data:`AHEAD` of Redis'."""
    real = time.time
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "time", lambda: real() + AHEAD.total_seconds())
        yield


def admitted(voucher, user_id: int):
    """The user's standing once admitted: joined, then polled (a room admitting 1,000 a second)."""
    standing = room_enter(VOUCHER, voucher, user_id=user_id, join=True)
    for _ in range(10_000):
        if standing.status == "admitted":
            return standing
        standing = room_enter(VOUCHER, voucher, user_id=user_id, join=False)
    raise AssertionError(f"not admitted: {standing}")


def redis_now(rooms) -> datetime:
    seconds, micros = rooms.time()
    return datetime.fromtimestamp(seconds + micros / 1_000_000, tz=UTC)


def test_a_process_whose_clock_runs_ahead_neither_drops_live_tickets_nor_hands_out_longer_ones(
    queued, rooms, make_user
):
    voucher = queued()
    first, second = make_user().pk, make_user().pk
    ticket = admitted(voucher, first).ticket
    with clock_ahead():
        later = admitted(voucher, second)  # its moves would have dropped the first ticket as lapsed
    assert later.ticket_expires_at <= redis_now(rooms) + timedelta(seconds=TICKET_SECONDS)
    standing = room_enter(VOUCHER, voucher, user_id=first, join=False)
    assert standing is not None and standing.ticket == ticket


@pytest.mark.parametrize("strategy", ["db_atomic", "redis_lua"])
def test_a_process_whose_clock_runs_ahead_takes_with_a_live_ticket(queued, make_user, strategy):
    voucher = queued(strategy=strategy)
    buyer = make_user().pk
    ticket = admitted(voucher, buyer).ticket
    with clock_ahead():
        with ticket_held(VOUCHER, voucher, user_id=buyer, ticket=ticket) as held:
            item_take(VOUCHER, voucher, user_id=buyer, ticket=held)
    assert room_enter(VOUCHER, voucher, user_id=buyer, join=False) is None  # spent
