"""Ids that name nothing are answered as missing, whatever their size.

Order and draw ids from 2**62 up are reservation ids (``inventory.redis_lua.values``): group and
number packed in one integer. Those in that range that ``reservation_id`` never makes (group
0, or number 0) are no reservation's, and answer as any unknown id does: 404 from the API,
the page's "cannot be found" from the status fragments polled by a pending outcome.
"""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from inventory.redis_lua.values import reservation_group, reservation_id

from .http import assert_error

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]

GROUP_ZERO = [2**62, 2**62 + 1, 2**62 + 2**30 - 1]
NUMBER_ZERO = [2**62 + 2**30, 2**62 + 5 * 2**30]
BEYOND = [2**63, 2**64 + 7]
LARGEST = 2**63 - 1  # a reservation id (group 2**32 - 1, number 2**30 - 1), but no one's
NOT_RESERVATIONS = [*GROUP_ZERO, *NUMBER_ZERO]


def test_reservation_group_knows_only_the_ids_reservation_id_makes():
    assert reservation_group(reservation_id(1, 1)) == 1
    assert reservation_group(LARGEST) == 2**32 - 1
    for other in [*NOT_RESERVATIONS, *BEYOND, 2**62 - 1, 1]:
        assert reservation_group(other) is None


@pytest.mark.parametrize("item_id", [*NOT_RESERVATIONS, *BEYOND, LARGEST])
@pytest.mark.parametrize("strategy", ["db_atomic", "redis_lua"])
def test_an_id_that_names_no_order_or_draw_answers_404_and_logs_no_error(
    item_id, strategy, make_user, make_voucher, make_pool, api_client, caplog
):
    # Items of both kinds exist, under the strategy, so that group 1 (or 0) may be one's.
    make_voucher(strategy=strategy)
    make_pool(strategy=strategy)
    user = make_user()
    api = api_client(user)
    page = Client()
    page.force_login(user)
    with caplog.at_level(logging.ERROR):
        assert_error(api.get(f"/api/orders/{item_id}"), 404, "not_found")
        assert_error(api.get(f"/api/draws/{item_id}"), 404, "not_found")
        order = page.get(f"/orders/{item_id}/status")
        draw = page.get(f"/draws/{item_id}/status")
    assert order.status_code == 200 and b'data-outcome="unknown_order"' in order.content
    assert draw.status_code == 200 and b'data-outcome="unknown_draw"' in draw.content
    assert [record for record in caplog.records if record.levelno >= logging.ERROR] == []
