"""The products a run uses, against the test database: fresh data, samples, the audit's
figures, confirmations read from outcome lines, and under redis_lua the wait until the
reservations are persisted and the Redis state's comparison with the database."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.services import users_with_tokens_create
from inventory.buckets import home_bucket
from inventory.product import product_of
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.drain import persist_all
from inventory.redis_lua.item_states import item_reservations_persist
from inventory.redis_lua.values import GroupKeys
from loadtests.products import PRODUCTS, Supply, split_stock
from loadtests.verdict import Result
from lottery.models import Pool
from lottery.selectors import pool_get
from lottery.services import pool_draw
from orders.models import Order, Voucher
from orders.selectors import voucher_get
from orders.services import order_purchase
from tests.stock import stock_left, stock_row

pytestmark = pytest.mark.django_db


def test_the_stock_is_split_evenly_over_the_prizes():
    assert split_stock(500, 5) == [100] * 5
    assert split_stock(502, 5) == [101, 101, 100, 100, 100]
    assert split_stock(3, 5) == [1, 1, 1, 0, 0]
    with pytest.raises(ValueError):
        split_stock(10, 0)


def test_a_fresh_pool_has_its_prizes_limit_and_strategy():
    pool_product = PRODUCTS["pool"]
    target = pool_product.create(
        title="load", strategy="db_atomic", supply=Supply(stock=502, prizes=5, draws_per_user=3, no_prize_weight=7)
    )
    pool = Pool.objects.get(pk=target.pk)
    assert (pool.draws_per_user, pool.no_prize_weight, pool.strategy, pool.group_id) == (
        3,
        7,
        "db_atomic",
        target.group_id,
    )
    assert [p.stock.quantity for p in pool.prizes.order_by("id")] == [101, 101, 100, 100, 100]
    assert pool_product.locust_env(target) == {"LOADTEST_POOL": str(pool.pk)}
    sample = pool_product.sample(target)
    assert (sample.stock, sample.supplied, sample.taken) == (502, 502, 0)


def test_a_pools_draws_are_audited_and_its_confirmations_checked(make_buyer):
    pool_product = PRODUCTS["pool"]
    target = pool_product.create(
        title="load", strategy="db_atomic", supply=Supply(stock=10, prizes=2, draws_per_user=3)
    )
    user = make_buyer()
    draws = [pool_draw(user=user, pool=pool_get(pool_id=target.pk)) for _ in range(3)]
    outcomes = [["won", str(d.public_id), str(d.prize_id)] for d in draws] + [["draw_limit"]]
    assert pool_product.confirmations(target, outcomes) == (3, 0)

    wrong_prize = [*outcomes[:2], ["won", str(draws[2].pk), str(draws[2].prize_id + 1000)]]
    missing = [*outcomes, ["no_prize", "999999"]]
    assert pool_product.confirmations(target, wrong_prize) == (3, 1)
    assert pool_product.confirmations(target, missing) == (3, 1)

    audit = pool_product.audit(target)
    assert audit.ok
    result = Result(scenario="draw-crowd", strategy="db_atomic", product="pool", **audit.figures)
    assert (result.awarded, result.draws, result.supplied, result.stock_left) == (3, 3, 10, 7)
    assert (result.over_awarded, result.users_over_limit, result.conserved) == (0, 0, True)
    sample = pool_product.sample(target)
    assert (sample.stock, sample.supplied, sample.taken) == (7, 10, 3)
    assert pool_product.wait_until_quiet(target, seconds=0.2, timeout=5)


def test_a_vouchers_orders_are_audited_and_its_confirmations_checked(make_buyer):
    voucher_product = PRODUCTS["voucher"]
    target = voucher_product.create(title="load", strategy="db_atomic", supply=Supply(stock=5, prizes=5))
    voucher = Voucher.objects.get(pk=target.pk)
    assert stock_left(voucher) == 5 and voucher.group_id == target.group_id
    orders = [order_purchase(user=make_buyer(), voucher=voucher) for _ in range(2)]
    outcomes = [["confirmed", str(o.public_id)] for o in orders] + [["sold_out"]]
    assert voucher_product.confirmations(target, outcomes) == (2, 0)
    assert voucher_product.confirmations(target, [*outcomes, ["confirmed", str(orders[0].pk)]]) == (3, 1)

    audit = voucher_product.audit(target)
    result = Result(scenario="crowd", strategy="db_atomic", product="voucher", **audit.figures)
    assert audit.ok and (result.orders, result.supplied, result.stock_left, result.oversold) == (2, 5, 3, 0)
    assert voucher_product.sample(target).taken == 2


@pytest.mark.parametrize("product", sorted(PRODUCTS))
def test_a_runs_fresh_item_is_not_for_sale_in_the_shops_lists_but_answers_by_id(client, make_user, product):
    """The race lab creates its items in the shop's own database: they must not crowd the
    shop's lists (pages and API), while its Locust users, the load crowd, reach them by id;
    anyone else hears 404 (``accounts.unlisted``)."""
    target = PRODUCTS[product].create(title="lab item", strategy="db_atomic", supply=Supply(stock=3, prizes=1))
    client.force_login(make_user())
    if product == "voucher":
        lists, detail = ["/", "/api/vouchers"], f"/api/vouchers/{target.pk}"
    else:
        lists, detail = ["/pools/", "/api/pools"], f"/api/pools/{target.pk}"
    for url in lists:
        page = client.get(url)
        assert page.status_code == 200 and b"lab item" not in page.content, url
    assert client.get(detail).status_code == 404
    [(_, token)] = users_with_tokens_create(count=1, prefix="lab997")
    assert Client(headers={"Authorization": f"Bearer {token}"}).get(detail).json()["id"] == target.pk


@pytest.mark.parametrize("product", sorted(PRODUCTS))
def test_an_item_made_listed_for_the_watched_scenario_is_seen_by_anonymous_tabs(product):
    supply = Supply(stock=3, prizes=1)
    target = PRODUCTS[product].create(title="watched", strategy="db_atomic", supply=supply, listed=True)
    page = f"/vouchers/{target.pk}/live" if product == "voucher" else f"/pools/{target.pk}/odds"
    assert Client().get(page).status_code == 200


def persist(product: str, target) -> int:
    """Write what waits in Redis, as the drain task does (here, in the test's process)."""
    reservations = reservations_client()
    item = {"product": product_of(product), "item_id": target.pk, "group_id": target.group_id}
    return persist_all(
        lambda batch: item_reservations_persist(**item, reservations=reservations, consumer="test", batch=batch)
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reservations_redis")
def test_a_redis_lua_vouchers_202s_count_once_persisted_each_as_one_order_by_its_reservation(make_buyer):
    voucher_product = PRODUCTS["voucher"]
    target = voucher_product.create(title="load", strategy="redis_lua", supply=Supply(stock=5))
    voucher = Voucher.objects.get(pk=target.pk)
    orders = [order_purchase(user=make_buyer(), voucher=voucher) for _ in range(3)]
    assert all(order.pk is None and order.reservation for order in orders)  # 202: nothing written yet
    outcomes = [["confirmed", str(order.public_id), "pending"] for order in orders] + [["sold_out"]]
    assert voucher_product.waiting(target) == 3
    assert voucher_product.sample(target).waiting == 3
    # Not yet persisted: the 202s are not borne out by the database.
    assert voucher_product.confirmations(target, outcomes) == (3, 3)
    assert voucher_product.wait_until_persisted(target, timeout=0.3) is None

    assert persist("voucher", target) == 3
    assert voucher_product.wait_until_persisted(target, timeout=5) is not None
    assert voucher_product.confirmations(target, outcomes) == (3, 0)
    # An order's primary key is not the id the buyer heard: it confirms nothing.
    written = Order.objects.get(reservation=orders[0].reservation)
    assert voucher_product.confirmations(target, [["confirmed", str(written.pk)]]) == (1, 1)
    assert voucher_product.confirmations(target, [*outcomes, outcomes[0]]) == (4, 1)  # one 202 twice

    check = voucher_product.reservations_check(target)
    assert check.state and not check.drifted and check.pending == 0
    # Redis' stock one unit off the database's: invariant 5 broken.
    reservations_client().add_units(group_id=target.group_id, stock_id=stock_row(voucher), units=-1)
    assert voucher_product.reservations_check(target).stock == {stock_row(voucher): (1, 2)}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reservations_redis")
def test_a_bucketed_redis_lua_vouchers_reservations_waiting_are_counted_in_every_buckets_stream(make_buyer):
    """Each bucket's state has a stream of its own: counted in bucket 0's alone, a run was
    audited while the others still held reservations."""
    voucher_product = PRODUCTS["voucher"]
    target = voucher_product.create(title="load", strategy="redis_lua", supply=Supply(stock=40, buckets=4))
    buyers = [make_buyer() for _ in range(8)]
    for buyer in buyers:
        order_purchase(user=buyer, voucher=voucher_get(voucher_id=target.pk))
    assert len({home_bucket(buyer.pk, 4) for buyer in buyers}) > 1  # streams beside bucket 0's
    assert voucher_product.waiting(target) == 8
    assert voucher_product.wait_until_persisted(target, timeout=0.3) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reservations_redis")
def test_a_redis_lua_pools_202s_are_found_by_reservation_with_the_prize_they_announced(make_buyer):
    pool_product = PRODUCTS["pool"]
    target = pool_product.create(
        title="load", strategy="redis_lua", supply=Supply(stock=4, prizes=2, draws_per_user=2, no_prize_weight=0)
    )
    user = make_buyer()
    draws = [pool_draw(user=user, pool=pool_get(pool_id=target.pk)) for _ in range(2)]
    outcomes = [["won", str(d.public_id), str(d.prize_id), "pending"] for d in draws]
    assert pool_product.waiting(target) == 2
    assert persist("pool", target) == 2
    assert pool_product.wait_until_persisted(target, timeout=5) is not None
    assert pool_product.confirmations(target, outcomes) == (2, 0)
    wrong_prize = [outcomes[0], ["won", str(draws[1].public_id), str(draws[1].prize_id + 1000), "pending"]]
    assert pool_product.confirmations(target, wrong_prize) == (2, 1)
    assert pool_product.audit(target).ok
    check = pool_product.reservations_check(target)
    assert check.state and not check.drifted
    # A user's takes in Redis that the database does not hold.
    reservations_client().client.hset(GroupKeys.of(target.group_id).state, user.pk, "3:1,2")  # 2 before
    assert pool_product.reservations_check(target).takers == {user.pk: (3, 2)}
