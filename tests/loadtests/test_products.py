"""The products a run uses, against the test database: fresh data, samples, the audit's
figures, and confirmations read from outcome lines."""

from __future__ import annotations

import pytest

from loadtests.products import PRODUCTS, Supply, split_stock
from loadtests.verdict import Result
from lottery.models import Pool
from lottery.selectors import pool_get
from lottery.services import pool_draw
from orders.models import Voucher
from orders.services import order_purchase

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


def test_a_pools_draws_are_audited_and_its_confirmations_checked(make_user):
    pool_product = PRODUCTS["pool"]
    target = pool_product.create(
        title="load", strategy="db_atomic", supply=Supply(stock=10, prizes=2, draws_per_user=3)
    )
    user = make_user()
    draws = [pool_draw(user=user, pool=pool_get(pool_id=target.pk)) for _ in range(3)]
    outcomes = [["won", str(d.pk), str(d.prize_id)] for d in draws] + [["draw_limit"]]
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
    pool_product.wait_until_quiet(target, seconds=0.2, timeout=5)


def test_a_vouchers_orders_are_audited_and_its_confirmations_checked(make_user):
    voucher_product = PRODUCTS["voucher"]
    target = voucher_product.create(title="load", strategy="db_atomic", supply=Supply(stock=5, prizes=5))
    voucher = Voucher.objects.get(pk=target.pk)
    assert voucher.stock.quantity == 5 and voucher.stock.group_id == target.group_id
    orders = [order_purchase(user=make_user(), voucher=voucher) for _ in range(2)]
    outcomes = [["confirmed", str(o.pk)] for o in orders] + [["sold_out"]]
    assert voucher_product.confirmations(target, outcomes) == (2, 0)
    assert voucher_product.confirmations(target, [*outcomes, ["confirmed", str(orders[0].pk)]]) == (3, 1)

    audit = voucher_product.audit(target)
    result = Result(scenario="crowd", strategy="db_atomic", product="voucher", **audit.figures)
    assert audit.ok and (result.orders, result.supplied, result.stock_left, result.oversold) == (2, 5, 3, 0)
    assert voucher_product.sample(target).taken == 2


@pytest.mark.parametrize("product", sorted(PRODUCTS))
def test_a_runs_fresh_item_is_not_for_sale_in_the_shops_lists_but_answers_by_id(client, make_user, product):
    """The race lab creates its items in the shop's own database: they must not crowd the
    shop's lists (pages and API), while its Locust users reach them by id."""
    target = PRODUCTS[product].create(title="lab item", strategy="db_atomic", supply=Supply(stock=3, prizes=1))
    client.force_login(make_user())
    if product == "voucher":
        lists, detail = ["/", "/api/vouchers"], f"/api/vouchers/{target.pk}"
    else:
        lists, detail = ["/pools/", "/api/pools"], f"/api/pools/{target.pk}"
    for url in lists:
        page = client.get(url)
        assert page.status_code == 200 and b"lab item" not in page.content, url
    assert client.get(detail).json()["id"] == target.pk
