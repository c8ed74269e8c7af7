"""Holds expire without anyone asking: a real Celery worker runs the task sent for their
deadline, and the beat's sweep catches those whose task never came (``inventory.holds``)."""

from __future__ import annotations

import pytest

from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_check
from orders.models import Order, Voucher
from orders.product import VOUCHER
from orders.selectors import voucher_audit, voucher_get
from orders.services import order_purchase
from tests.stock import stock_left, stock_row

from .test_reservations_worker import app_worker  # noqa: F401  (the fixture)
from .waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis"), pytest.mark.live]


def buy_held(voucher: Voucher, make_user, count: int) -> list[int]:
    return [
        order_purchase(user=make_user(), voucher=voucher_get(voucher_id=voucher.pk)).public_id for _ in range(count)
    ]


def released(voucher: Voucher) -> bool:
    return Order.objects.filter(voucher=voucher, status=Order.Status.EXPIRED).count()


@pytest.mark.parametrize("strategy", ["db_atomic", "redis_lua"])
def test_a_worker_expires_holds_at_their_deadline(make_voucher, make_user, app_worker, strategy):  # noqa: F811
    app_worker()
    voucher = make_voucher(stock=5, strategy=strategy)
    Voucher.objects.filter(pk=voucher.pk).update(hold_seconds=1)
    buy_held(voucher, make_user, 3)

    def units_back_in_redis() -> bool:
        # redis_lua's release returns its units to Redis after its commit: a moment later.
        return strategy != "redis_lua" or reservations_client().stock(group_id=voucher.group_id) == {
            stock_row(voucher): 5
        }

    wait_until(lambda: released(voucher) == 3, "the worker expired the three holds", timeout=30)
    wait_until(units_back_in_redis, "the released units are back in Redis", timeout=30)

    assert stock_left(voucher) == 5
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert (audit.holds.held, audit.holds.released, audit.holds.returned_twice, audit.ok) == (0, 3, 0, True)
    if strategy == "redis_lua":
        assert reservations_client().stock(group_id=voucher.group_id) == {stock_row(voucher): 5}
        assert not item_reservations_check(VOUCHER, item=voucher_get(voucher_id=voucher.pk)).drifted


def test_the_beats_sweep_expires_holds_whose_task_never_came(make_voucher, make_user, app_worker, settings):  # noqa: F811
    # No task sent at a deadline here: the sweep alone must release them.
    settings.HOLD_TASK_HORIZON_SECONDS = -1
    app_worker(HOLDS_SWEEP_SECONDS="1", HOLD_TASK_HORIZON_SECONDS="-1")
    app_worker(beat=True, HOLDS_SWEEP_SECONDS="1", HOLD_TASK_HORIZON_SECONDS="-1")
    voucher = make_voucher(stock=4, strategy="db_pessimistic")
    Voucher.objects.filter(pk=voucher.pk).update(hold_seconds=1)
    buy_held(voucher, make_user, 4)

    wait_until(lambda: released(voucher) == 4, "the sweep expired the four holds", timeout=30)

    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree, audit  # the pages' running totals, whatever the strategy
    assert (audit.stock, audit.holds.released, audit.holds.returned_twice, audit.ok) == (4, 4, 0, True)
