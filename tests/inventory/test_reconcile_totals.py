"""The beat's reconciliation compares totals first (``inventory.redis_lua.reconcile``): each
stock row, and the take numbers marked in Redis against the records + the reservations
pending; each user's takes only on a difference, or once the last comparison per user is
older than ``RESERVATIONS_RECONCILE_FULL_SECONDS``. ``manage.py reconcile`` always compares
each user."""

from __future__ import annotations

import pytest
from django.conf import settings

from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_check, item_reservations_reconcile
from inventory.redis_lua.values import GroupKeys
from lottery.models import Draw
from lottery.product import POOL
from lottery.services import pool_update
from orders.models import Order
from orders.product import VOUCHER
from orders.services import voucher_update

from .. import records

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("reservations_redis")]


def beat(product, item):
    """What the beat's task does for one item."""
    return item_reservations_reconcile(product, item=product.items().get(pk=item.pk), totals_first=True)


@pytest.fixture
def voucher(make_voucher):
    """A redis_lua voucher with 20 orders in every status, its state loaded from them."""
    voucher = make_voucher(stock=50)
    records.orders(voucher, 20)
    return voucher_update(voucher=voucher, strategy="redis_lua")


def test_the_totals_stand_in_for_each_user_once_a_comparison_per_user_found_the_item_whole(voucher):
    first = beat(VOUCHER, voucher)
    assert first.per_user and not first.drifted  # nothing compared per user yet
    ttl = reservations_client().client.ttl(GroupKeys.of(voucher.group_id).checked)
    assert 0 < ttl <= settings.RESERVATIONS_RECONCILE_FULL_SECONDS
    second = beat(VOUCHER, voucher)
    assert (second.state, second.drifted, second.per_user) == (True, False, False)
    # The command and the audit compare each user whatever the totals say.
    assert item_reservations_check(VOUCHER, item=voucher).per_user


def test_a_record_on_one_side_only_changes_a_total_and_is_found_and_repaired(voucher):
    beat(VOUCHER, voucher)
    # A taking order gone from the database behind Redis' back.
    gone = Order.objects.filter(voucher=voucher, status=Order.Status.CONFIRMED).first()
    Order.objects.filter(pk=gone.pk).update(status=Order.Status.CANCELLED, buyer_guard=None)
    check = beat(VOUCHER, voucher)
    assert check.per_user and check.repaired
    assert check.takers == {gone.user_id: (1, 0)}
    # The repair dropped the freed take's number too: the totals agree again.
    assert (check.seqs_unused, beat(VOUCHER, voucher).per_user) == (1, False)


def test_a_take_number_lost_in_redis_is_marked_again_by_the_comparison_per_user(voucher):
    """The number and its take share a field: no script loses one alone, and the totals
    (takes) stay; the comparison per user finds it, as any change by hand."""
    beat(VOUCHER, voucher)
    keys = GroupKeys.of(voucher.group_id)
    client = reservations_client().client
    buyer = Order.objects.filter(voucher=voucher, status=Order.Status.PAID).values_list("user_id", flat=True).first()
    client.hset(keys.state, buyer, "1:")  # the take kept, its number lost
    client.delete(keys.checked)  # what its expiry does
    check = beat(VOUCHER, voucher)
    assert (check.per_user, check.seqs_missing, check.repaired) == (True, 1, True)
    assert client.hget(keys.state, buyer) == b"1"


def test_a_drift_that_keeps_the_totals_is_found_by_the_next_comparison_per_user(voucher):
    """One user's take moved to another in Redis, the marks left as they were: no total
    changes. The beat's comparison per user finds it once the last one expires, as the
    command does at once."""
    beat(VOUCHER, voucher)
    keys = GroupKeys.of(voucher.group_id)
    client = reservations_client().client
    buyer = Order.objects.filter(voucher=voucher, status=Order.Status.CONFIRMED).values_list("user_id", flat=True)[0]
    stranger = records.users(1)[0].pk
    client.hdel(keys.state, buyer)
    client.hset(keys.state, stranger, 1)

    assert not beat(VOUCHER, voucher).per_user  # the totals agree: missed for now
    assert item_reservations_check(VOUCHER, item=voucher).takers == {buyer: (0, 1), stranger: (1, 0)}
    client.delete(keys.checked)  # what its expiry does
    check = beat(VOUCHER, voucher)
    assert check.per_user and check.repaired
    assert check.takers == {buyer: (0, 1), stranger: (1, 0)}
    assert not item_reservations_check(VOUCHER, item=voucher).drifted


def test_a_pools_totals_count_its_draws_and_the_reservations_waiting(make_pool, make_user):
    pool = make_pool(prizes=(("Gold", 5),), draws_per_user=3, no_prize_weight=1)
    records.draws(pool, 10)
    pool = pool_update(pool=pool, strategy="redis_lua")
    assert beat(POOL, pool).per_user
    reservations = reservations_client()
    for _ in range(2):
        assert reservations.reserve(group_id=pool.group_id, user_id=make_user().pk, rand=0.5).refusal is None
    check = beat(POOL, pool)
    assert (check.per_user, check.drifted, check.pending) == (False, False, 2)
    # A draw written behind Redis' back (its user's take and number unknown there).
    player = make_user()
    Draw.objects.create(user=player, pool=pool, seq=1, user_guard=player.pk)
    check = beat(POOL, pool)
    assert check.per_user and check.takers == {player.pk: (0, 1)} and check.seqs_missing == 1
    assert not beat(POOL, pool).per_user
