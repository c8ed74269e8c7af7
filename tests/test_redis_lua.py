"""redis_lua through the services and the HTTP API: 202 and the reservation's id, the order
or draw pending then confirmed or failed, 503 while the state is missing, and the state
kept in step with the switch of strategy, the window, the rules and every restock.

Persisting runs here in the test's process (``inventory.redis_lua.persist``); the worker
process is tested in ``tests/test_reservations_worker.py``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from core.window import NotStarted
from inventory.models import StockGroup
from inventory.records import internal_of
from inventory.redis_lua.bucket_states import states_present
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.drain import persist_all
from inventory.redis_lua.item_states import (
    item_reservations_check,
    item_reservations_persist,
    item_reservations_reconcile,
)
from inventory.redis_lua.values import GroupKeys, reservation_group
from inventory.strategies import STRATEGIES
from inventory.strategies.base import Take
from lottery.models import Draw
from lottery.product import POOL
from lottery.services import pool_update, prize_create, prize_update
from orders.models import Order
from orders.product import VOUCHER
from orders.services import voucher_update
from tests.stock import stock_left, stock_row

from .http import assert_error

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]


def persist_states(product, item_id: int, states: list[int], **options) -> int:
    """Persist what waits in each of ``states``' streams, as the drain task does; ``options``:
    ``reservations_persist``'s."""
    reservations = reservations_client()
    return sum(
        persist_all(
            lambda batch, state=state: item_reservations_persist(
                product,
                item_id=item_id,
                group_id=state,
                reservations=reservations,
                consumer="test",
                batch=batch,
                **options,
            )  # fmt: skip
        )
        for state in states
    )


def persist_voucher(voucher, **options) -> int:
    """Persist what waits (one stream per state of a bucketed voucher)."""
    states = [voucher.group_id, *states_present(reservations_client(), voucher.group_id)]
    return persist_states(VOUCHER, voucher.pk, states, **options)


def persist_pool(pool, **options) -> int:
    return persist_states(POOL, pool.pk, [pool.group_id], **options)


def purchase(client: Client, voucher):
    return client.post(f"/api/vouchers/{voucher.pk}/purchase")


def redis_stock(group_id: int) -> dict[int, int] | None:
    return reservations_client().stock(group_id=group_id)


def test_a_purchase_answers_202_and_the_order_is_pending_then_confirmed_under_the_same_id(api_client, make_voucher):
    voucher = make_voucher(stock=2, strategy="redis_lua")
    buyer, other = api_client(), api_client()
    answer = purchase(buyer, voucher)
    assert answer.status_code == 202
    order_id = answer.json()["order_id"]
    assert answer.json()["status"] == "pending"
    assert reservation_group(internal_of(order_id)) == voucher.group_id
    assert not Order.objects.exists()  # nothing written in the request
    pending = buyer.get(f"/api/orders/{order_id}").json()
    assert (pending["id"], pending["status"], pending["voucher_id"]) == (order_id, "pending", voucher.pk)
    assert [one["status"] for one in buyer.get("/api/orders").json()] == ["pending"]
    assert_error(other.get(f"/api/orders/{order_id}"), 404, "not_found")  # another user's
    assert_error(purchase(buyer, voucher), 409, "already_purchased")
    assert persist_voucher(voucher) == 1
    confirmed = buyer.get(f"/api/orders/{order_id}").json()
    assert (confirmed["id"], confirmed["status"]) == (order_id, "confirmed")
    assert [one["id"] for one in buyer.get("/api/orders").json()] == [order_id]
    assert_error(other.get(f"/api/orders/{order_id}"), 404, "not_found")
    assert stock_left(voucher) == 1 == redis_stock(voucher.group_id)[stock_row(voucher)]


def test_an_order_the_database_refuses_is_failed_with_its_reason_and_the_unit_is_back(
    api_client, make_voucher, make_user
):
    voucher = make_voucher(stock=1, strategy="redis_lua")
    buyer = api_client()
    order_id = purchase(buyer, voucher).json()["order_id"]
    # The buyer got an order some other way meanwhile: the database's one-per-user key refuses.
    Order.objects.create(user=buyer.user, voucher=voucher, stock_id=stock_row(voucher), buyer_guard=buyer.user.pk)
    persist_voucher(voucher)
    failed = buyer.get(f"/api/orders/{order_id}").json()
    assert failed["status"] == "failed"
    assert "refused" in failed["reason"]
    assert redis_stock(voucher.group_id) == {stock_row(voucher): 1}
    assert purchase(api_client(), voucher).status_code == 202  # the unit sells again


def test_a_missing_state_answers_503_and_reconciliation_rebuilds_it(api_client, make_voucher, reservations_redis):
    voucher = make_voucher(stock=3, strategy="redis_lua")
    first = api_client()
    assert purchase(first, voucher).status_code == 202
    persist_voucher(voucher)
    reservations_redis.delete(*GroupKeys.of(voucher.group_id).all())  # Redis lost the keys
    refused = purchase(api_client(), voucher)
    assert_error(refused, 503, "unavailable")
    assert refused["Retry-After"]
    assert item_reservations_check(VOUCHER, item=voucher, reservations=reservations_client()).state is False
    check = item_reservations_reconcile(VOUCHER, item=voucher, reservations=reservations_client())
    assert check.rebuilt
    assert redis_stock(voucher.group_id) == {stock_row(voucher): 2}
    assert_error(purchase(first, voucher), 409, "already_purchased")  # the buyers came back too
    assert purchase(api_client(), voucher).status_code == 202


def test_a_state_of_the_earlier_layout_is_rebuilt_in_the_new_one(api_client, make_voucher, reservations_redis):
    """What Redis held before the state's second layout: no state to the new code, which
    asks for a rebuild; the rebuild loads the new layout and removes the earlier keys."""
    voucher = make_voucher(stock=3, strategy="redis_lua")
    first = api_client()
    assert purchase(first, voucher).status_code == 202
    persist_voucher(voucher)
    keys = GroupKeys.of(voucher.group_id)
    reservations_redis.delete(keys.state)
    earlier = {"begin_ms": 0, "end_ms": 10**14, "limit": 1, "no_take": 0, f"stock:{stock_row(voucher)}": 2}
    reservations_redis.hset(keys.state, mapping=earlier)
    reservations_redis.hset(keys.takers, first.user.pk, 1)
    reservations_redis.hset(keys.seqs, f"{first.user.pk}:1", 1)
    assert_error(purchase(api_client(), voucher), 503, "unavailable")
    assert item_reservations_reconcile(VOUCHER, item=voucher, reservations=reservations_client()).rebuilt
    assert not reservations_redis.exists(keys.takers, keys.seqs)
    assert redis_stock(voucher.group_id) == {stock_row(voucher): 2}
    assert_error(purchase(first, voucher), 409, "already_purchased")
    assert purchase(api_client(), voucher).status_code == 202


def test_switching_to_redis_lua_and_back_keeps_every_unit_and_buyer(api_client, make_voucher):
    voucher = make_voucher(stock=5, strategy="db_atomic")
    early = api_client()
    assert purchase(early, voucher).status_code == 201
    voucher_update(voucher=voucher, strategy="redis_lua")
    group = voucher.group_id
    assert redis_stock(group) == {stock_row(voucher): 4}
    assert_error(purchase(early, voucher), 409, "already_purchased")
    late = api_client()
    assert purchase(late, voucher).status_code == 202
    voucher_update(voucher=voucher, strategy="db_pessimistic")  # what waited is written, the state dropped
    assert redis_stock(group) is None
    assert Order.objects.filter(voucher=voucher).count() == 2
    assert stock_left(voucher) == 3
    assert_error(purchase(late, voucher), 409, "already_purchased")
    assert purchase(api_client(), voucher).status_code == 201
    voucher_update(voucher=voucher, strategy="redis_lua")  # built afresh from the database
    assert redis_stock(group) == {stock_row(voucher): 2}
    assert not item_reservations_check(VOUCHER, item=voucher, reservations=reservations_client()).drifted


def test_restock_and_a_new_window_reach_the_state_in_redis(api_client, make_voucher):
    voucher = make_voucher(stock=1, strategy="redis_lua")
    assert purchase(api_client(), voucher).status_code == 202
    assert_error(purchase(api_client(), voucher), 409, "sold_out")
    voucher_update(voucher=voucher, restock=2)
    assert redis_stock(voucher.group_id) == {stock_row(voucher): 2}
    assert purchase(api_client(), voucher).status_code == 202
    later = timezone.now() + timedelta(hours=1)
    voucher_update(voucher=voucher, begin_at=later, end_at=later + timedelta(hours=1))
    # The database's window refuses first; Redis' own refuses a caller who skipped it.
    with pytest.raises(NotStarted):
        STRATEGIES["redis_lua"].take(
            Take(
                group_id=voucher.group_id,
                choose=None,
                check=None,
                record=None,
                user_id=api_client().user.pk,
                kind="voucher",
                item_id=voucher.pk,
                over_limit=AssertionError,
                reserved=AssertionError,
            )
        )
    persist_voucher(voucher)
    assert not item_reservations_check(VOUCHER, item=voucher, reservations=reservations_client()).drifted


def test_reconciliation_repairs_drift_while_reservations_wait(api_client, make_voucher, reservations_redis):
    voucher = make_voucher(stock=10, strategy="redis_lua")
    buyers = [api_client() for _ in range(3)]
    for buyer in buyers:
        assert purchase(buyer, voucher).status_code == 202
    keys = GroupKeys.of(voucher.group_id)
    reservations_client().add_units(group_id=voucher.group_id, stock_id=stock_row(voucher), units=4)  # drifted
    reservations_redis.hdel(keys.state, buyers[0].user.pk)  # and a buyer forgotten
    drift = item_reservations_check(VOUCHER, item=voucher, reservations=reservations_client())
    assert drift.stock == {stock_row(voucher): (11, 7)}
    assert drift.takers == {buyers[0].user.pk: (0, 1)}
    assert drift.pending == 3
    assert item_reservations_reconcile(VOUCHER, item=voucher, reservations=reservations_client()).repaired
    assert not item_reservations_check(VOUCHER, item=voucher, reservations=reservations_client()).drifted
    assert_error(purchase(buyers[0], voucher), 409, "already_purchased")
    persist_voucher(voucher)
    assert stock_left(voucher) == 7 == redis_stock(voucher.group_id)[stock_row(voucher)]


@pytest.mark.parametrize("buckets", [1, 4], ids=["one-row", "bucketed"])
def test_a_draw_answers_202_with_its_prize_and_is_listed_pending_then_confirmed(api_client, make_pool, buckets):
    """A bucketed pool keeps its rows in one state: its pending draws were looked for in the
    drawer's home bucket's, and were missing from their list."""
    pool = make_pool(prizes=(("Gold", 1),), no_prize_weight=0, draws_per_user=2, strategy="redis_lua", buckets=buckets)
    player = api_client()
    answer = player.post(f"/api/pools/{pool.pk}/draw")
    assert answer.status_code == 202
    body = answer.json()
    gold = pool.prizes.get()
    assert (body["status"], body["prize"], body["draws_left"]) == ("pending", {"id": gold.pk, "name": "Gold"}, 1)
    assert_error(player.post(f"/api/pools/{pool.pk}/draw"), 409, "pool_empty")
    listed = player.get("/api/draws").json()
    assert [(one["draw_id"], one["status"]) for one in listed] == [(body["draw_id"], "pending")]
    assert player.get(f"/api/pools/{pool.pk}").json()["draws_left"] == 1  # the pending draw counts
    persist_pool(pool)
    one = player.get(f"/api/draws/{body['draw_id']}").json()
    assert (one["status"], one["prize"]["id"]) == ("confirmed", gold.pk)
    assert Draw.objects.get().public_id == body["draw_id"]


def test_a_pools_rules_prizes_and_restocks_follow_in_redis(api_client, make_pool):
    pool = make_pool(prizes=(("Gold", 1),), no_prize_weight=0, draws_per_user=1, strategy="redis_lua")
    player = api_client()
    assert player.post(f"/api/pools/{pool.pk}/draw").status_code == 202
    assert_error(player.post(f"/api/pools/{pool.pk}/draw"), 409, "draw_limit")
    pool_update(pool=pool, draws_per_user=2)
    silver = prize_create(pool=pool, name="Silver", stock=2)
    prize_update(prize=pool.prizes.get(name="Gold"), restock=1)
    gold = pool.prizes.get(name="Gold")
    assert redis_stock(pool.group_id) == {gold.stock_id: 1, silver.stock_id: 2}
    assert player.post(f"/api/pools/{pool.pk}/draw").status_code == 202
    assert_error(player.post(f"/api/pools/{pool.pk}/draw"), 409, "draw_limit")
    persist_pool(pool)
    assert not item_reservations_check(POOL, item=pool, reservations=reservations_client()).drifted
    pool_update(pool=pool, strategy="db_atomic")
    assert redis_stock(pool.group_id) is None
    assert not item_reservations_reconcile(POOL, item=pool, reservations=reservations_client()).rebuilt


def test_a_purchase_right_after_a_switch_away_goes_through_the_new_strategy(api_client, make_voucher):
    """The API keeps a redis_lua voucher a second per process; the switch drops the Redis
    state first, so the kept copy hears unavailable and the voucher is read again."""
    voucher = make_voucher(stock=3, strategy="redis_lua")
    assert purchase(api_client(), voucher).status_code == 202  # the voucher is kept now
    voucher_update(voucher=voucher, strategy="db_atomic")
    answer = purchase(api_client(), voucher)
    assert answer.status_code == 201, answer.content
    assert Order.objects.filter(voucher=voucher).count() == 2  # the reservation was written by the switch


def test_a_draw_right_after_a_switch_away_goes_through_the_new_strategy(api_client, make_pool):
    pool = make_pool(prizes=(("Gold", 3),), draws_per_user=2, strategy="redis_lua")
    assert api_client().post(f"/api/pools/{pool.pk}/draw").status_code == 202
    pool_update(pool=pool, strategy="db_atomic")
    assert api_client().post(f"/api/pools/{pool.pk}/draw").status_code == 201
    assert Draw.objects.filter(pool=pool).count() == 2


def test_a_new_item_forgets_what_redis_kept_for_a_group_of_the_same_id(api_client, make_pool, reservations_redis):
    """A database made afresh beside a Redis that kept its keys hands out the same group ids:
    the old group's waiting reservations (of rows the new pool does not have) and numbering
    must not become the new pool's."""
    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.values import Rules

    next_group = StockGroup.objects.create().pk + 1  # the id the pool's group will get
    stale = Reservations(reservations_redis)
    now = timezone.now()
    stale.load(
        group_id=next_group, rules=Rules(now - timedelta(minutes=1), now + timedelta(hours=1), 1), stock={999_999: 5}
    )
    stale.reserve(group_id=next_group, user_id=1, rand=0.0)
    pool = make_pool(prizes=(("Gold", 2),), strategy="redis_lua")
    assert pool.group_id == next_group
    assert reservations_client().waiting(group_id=pool.group_id) == 0
    gold = pool.prizes.get()
    assert redis_stock(pool.group_id) == {gold.stock_id: 2}
    answer = api_client().post(f"/api/pools/{pool.pk}/draw")
    assert answer.status_code == 202 and answer.json()["prize"]["id"] == gold.pk
    assert persist_pool(pool) == 1


def test_the_beat_repairs_a_listed_items_drift_and_reports_an_unlisted_ones_for_its_lanes_audit(make_voucher):
    """A race lab run's item (unlisted) is audited by its lane when it ends: repaired mid-lane
    by the beat, the drift the audit is there to find was gone before it looked."""
    from inventory.tasks import reservations_reconcile

    shop, lab = make_voucher(strategy="redis_lua"), make_voucher(strategy="redis_lua", listed=False)
    for voucher in (shop, lab):
        reservations_client().add_units(group_id=voucher.group_id, stock_id=stock_row(voucher), units=2)
    assert reservations_reconcile("voucher") == 2  # both found drifted
    assert reservations_client().stock(group_id=shop.group_id) == {stock_row(shop): 5}  # repaired
    assert reservations_client().stock(group_id=lab.group_id) == {stock_row(lab): 7}  # left for its audit
    assert reservations_reconcile("voucher") == 1
