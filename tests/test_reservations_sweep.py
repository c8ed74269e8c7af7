"""The beat's sweep of ``redis_lua`` streams goes on past a sale's end: a reservation made
just before it, whose ask for a drain was lost, was left pending for good once the sale was
over (the sweep read live items only)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from inventory.tasks import reservations_sweep
from orders.models import Voucher
from orders.selectors import voucher_get
from orders.services import order_purchase

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]


def test_the_sweep_asks_for_the_drain_of_a_sale_ended_with_reservations_waiting(make_voucher, make_user, settings):
    settings.RESERVATIONS_SWEEP_AFTER_END_SECONDS = 3600
    voucher = make_voucher(stock=3, strategy="redis_lua")
    order_purchase(user=make_user(), voucher=voucher_get(voucher_id=voucher.pk))  # waiting in the stream
    assert reservations_sweep("voucher") == 1
    ended = Voucher.objects.filter(pk=voucher.pk)
    ended.update(begin_at=timezone.now() - timedelta(days=1), end_at=timezone.now() - timedelta(minutes=5))
    assert reservations_sweep("voucher") == 1  # over, and its reservation still asked for
    ended.update(end_at=timezone.now() - timedelta(hours=2))
    assert reservations_sweep("voucher") == 0  # past the setting: no longer read
