"""redis_lua on a real Redis Cluster of three masters with a replica each
(``RESERVATIONS_REDIS_CLUSTER``), through the services and the HTTP API: reservations
spread over the masters by their items' hash tags are made, written, released, compared
with the database and rebuilt as on one Redis; and, with ``RESERVATIONS_WAIT_REPLICAS``,
a reservation is answered 202 only once a replica has it, and written only then.

A master killed and replaced by its replica is the fault runner's (``failover-wait``,
``failover-no-wait``: ``tests/loadtests/test_faults_failover.py``).
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager

import pytest
from django.test import Client
from redis.cluster import ClusterNode

from inventory.records import internal_of
from inventory.redis_lua.backlog import reservations_backlog
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import (
    item_reservations_check,
    item_reservations_reconcile,
)
from inventory.redis_lua.values import GroupKeys, reservation_group
from locking.testing import slot_servers
from orders.models import Order, Voucher
from orders.product import VOUCHER
from orders.selectors import order_get
from orders.services import order_cancel
from tests.records import answered_row

from .http import assert_error
from .stock import stock_left, stock_row
from .test_redis_lua import persist_states

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("cluster_reservations"),
    pytest.mark.live,
]


def persist(voucher) -> int:
    """Persist what waits, as the drain task does."""
    return persist_states(VOUCHER, voucher.pk, [voucher.group_id])


def purchase(client: Client, voucher):
    return client.post(f"/api/vouchers/{voucher.pk}/purchase")


def master_port(cluster, voucher) -> int:
    return cluster.get_node_from_key(GroupKeys.of(voucher.group_id).state).port


@contextmanager
def replica_stopped(cluster, cluster_servers, voucher):
    """The replica of the voucher's master stopped (SIGSTOP) for a moment, well within the
    cluster's node timeout: its master goes on, and nothing it writes reaches the replica."""
    _, (server,) = slot_servers(cluster_servers, cluster.keyslot(GroupKeys.of(voucher.group_id).state))
    os.kill(server.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)


def test_a_sale_spread_over_the_masters_reserves_writes_releases_reconciles_and_rebuilds(
    api_client, make_voucher, cluster_reservations
):
    vouchers = [make_voucher(stock=3, strategy="redis_lua") for _ in range(6)]
    Voucher.objects.filter(pk__in=[v.pk for v in vouchers]).update(hold_seconds=60)
    assert len({master_port(cluster_reservations, voucher) for voucher in vouchers}) >= 2
    for voucher in vouchers:
        first, second = api_client(), api_client()
        answers = [purchase(first, voucher), purchase(second, voucher)]
        assert [answer.status_code for answer in answers] == [202, 202]
        assert reservation_group(internal_of(answers[0].json()["order_id"])) == voucher.group_id
        assert_error(purchase(first, voucher), 409, "already_purchased")
        assert first.get(f"/api/orders/{answers[0].json()['order_id']}").json()["status"] == "pending"
        assert reservations_backlog(reservations_client(), group_ids=[v.group_id for v in vouchers])[0] >= 2

        assert persist(voucher) == 2
        held = first.get(f"/api/orders/{answers[0].json()['order_id']}").json()
        assert held["status"] == "held"
        cancelled = order_cancel(order=order_get(user=first.user, order_id=held["id"]))  # the unit goes back to Redis
        assert cancelled.status == Order.Status.CANCELLED
        assert reservations_client().stock(group_id=voucher.group_id) == {stock_row(voucher): 2}
        assert stock_left(voucher) == 2
        assert not item_reservations_check(VOUCHER, item=voucher, reservations=reservations_client()).drifted

    voucher = vouchers[0]
    cluster_reservations.delete(*GroupKeys.of(voucher.group_id).all())  # the master lost the keys
    assert_error(purchase(api_client(), voucher), 503, "unavailable")
    check = item_reservations_reconcile(VOUCHER, item=voucher, reservations=reservations_client())
    assert check.rebuilt
    assert reservations_client().stock(group_id=voucher.group_id) == {stock_row(voucher): 2}
    assert purchase(api_client(), voucher).status_code == 202
    assert persist(voucher) == 1
    assert Order.objects.filter(voucher=voucher).exclude(status=Order.Status.CANCELLED).count() == 2


def test_with_wait_a_reservation_a_replica_has_is_answered_202(api_client, make_voucher, settings):
    settings.RESERVATIONS_WAIT_REPLICAS = 1
    voucher = make_voucher(stock=2, strategy="redis_lua")
    answer = purchase(api_client(), voucher)
    assert answer.status_code == 202
    assert persist(voucher) == 1
    assert answered_row(Order, answer.json()["order_id"]).voucher_id == voucher.pk


def test_with_wait_a_reservation_no_replica_confirmed_is_unconfirmed_and_written_once_one_has_it(
    api_client, make_voucher, settings, cluster_reservations, cluster_servers
):
    settings.RESERVATIONS_WAIT_REPLICAS, settings.RESERVATIONS_WAIT_MS = 1, 50
    voucher = make_voucher(stock=2, strategy="redis_lua")
    buyer = api_client()
    with replica_stopped(cluster_reservations, cluster_servers, voucher):
        refused = purchase(buyer, voucher)
        assert_error(refused, 503, "unconfirmed")
        assert refused["Retry-After"]
        # Not written while the replica lacks it: a master that died now would take it along.
        assert persist(voucher) == 0
    (order,) = buyer.get("/api/orders").json()  # made all the same, on the master
    assert str(order["id"]) in refused.json()["message"] and order["status"] == "pending"
    assert_error(purchase(buyer, voucher), 409, "already_purchased")
    assert persist(voucher) == 1
    assert answered_row(Order, order["id"]).user_id == buyer.user.pk
    assert not item_reservations_check(VOUCHER, item=voucher, reservations=reservations_client()).drifted


def test_a_client_follows_a_slot_moved_to_another_node(make_voucher, settings, cluster_servers):
    """A MOVED answer (the slot's master is another node since the client read the map: its
    replica since a failover) did not run the script: it is sent to the node named, once,
    whatever the node that moved it answered to the WAIT sent with it."""
    settings.RESERVATIONS_WAIT_REPLICAS = 1
    voucher = make_voucher(stock=2, strategy="redis_lua")
    reservations = reservations_client()
    nodes = reservations.client.nodes_manager
    slot = reservations.client.keyslot(GroupKeys.of(voucher.group_id).state)
    master, (replica,) = slot_servers(cluster_servers, slot)
    nodes.slots_cache[slot] = [ClusterNode("127.0.0.1", replica.port)]  # as if it had been promoted
    try:
        reserved = reservations.reserve(group_id=voucher.group_id, user_id=1, rand=0.5)
        assert [node.port for node in nodes.slots_cache[slot]][:1] == [master.port]
    finally:
        nodes.initialize()
    assert reserved.refusal is None and not reserved.unconfirmed
    assert reservations.stock(group_id=voucher.group_id) == {stock_row(voucher): 1}


def test_a_bucketed_vouchers_states_land_on_every_master_and_sell_it_whole(
    api_client, make_voucher, cluster_reservations
):
    from inventory.redis_lua.bucket_states import item_states

    voucher = make_voucher(stock=5, strategy="redis_lua", buckets=8)
    states = item_states(voucher.group_id, 8)
    assert len({cluster_reservations.get_node_from_key(GroupKeys.of(state).state).port for state in states}) == 3
    answers = [purchase(api_client(), voucher) for _ in range(9)]
    assert [answer.status_code for answer in answers].count(202) == 5  # borrowing across masters
    assert all(answer.status_code in (202, 409) for answer in answers)
    assert persist_states(VOUCHER, voucher.pk, states) == 5
    assert Order.objects.filter(voucher=voucher).count() == 5
    assert stock_left(voucher) == 0
    assert not item_reservations_check(VOUCHER, item=voucher, reservations=reservations_client()).drifted
