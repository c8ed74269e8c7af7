"""A voucher split into buckets (``inventory.buckets``), sold by many processes at once under
every safe strategy: the stock is sold exactly, once per user, across buckets; when demand
exceeds supply every unit is sold, wherever it sat; and each released unit goes back, once, to
the bucket it came from. Its API answers say how many buckets it has."""

from __future__ import annotations

from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Count
from django.utils import timezone

from inventory.buckets import home_bucket
from inventory.errors import SoldOut
from inventory.holds import holds_expire_due
from inventory.models import Stock
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_check
from inventory.services import MAX_UNITS
from inventory.strategies import STRATEGIES, strategy_names
from orders.models import Order
from orders.product import VOUCHER
from orders.selectors import voucher_audit, voucher_get
from orders.services import order_cancel, order_purchase, voucher_update

from .buyers import act_concurrently, buy_concurrently
from .http import assert_error, patch_json, post_json
from .test_api import voucher_body
from .test_concurrency import crowd  # noqa: F401  (the fixture: 8 processes x 4 buyers, 4 firing twice)
from .test_holds import buy, change_concurrently, windowed
from .test_redis_lua import persist_voucher

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redlock_urls", "reservations_redis")]

SAFE = strategy_names(breaks=None)
QUEUEING = [name for name in SAFE if not STRATEGIES[name].sheds_load]
GUARDED = [name for name in strategy_names() if STRATEGIES[name].guarded]
BUCKETS = 8
STOCK = 12  # fewer than the 28 buyers: the sale must end with every unit sold
BUYERS = 28


def rows_of(voucher) -> list[tuple[int, int, int, int]]:
    """``(bucket, quantity, taken, initial)`` of each of the voucher's rows."""
    rows = Stock.objects.filter(group_id=voucher.group_id).order_by("bucket")
    return list(rows.values_list("bucket", "quantity", "taken", "initial_quantity"))


def orders_per_row(voucher, **filters) -> Counter:
    counted = Order.objects.filter(voucher=voucher, **filters).values("stock_id").annotate(n=Count("id"))
    return Counter({row["stock_id"]: row["n"] for row in counted})


@pytest.mark.race
@pytest.mark.parametrize("strategy", SAFE)
def test_a_bucketed_voucher_sells_every_unit_once_per_user_across_buckets(strategy, make_voucher, crowd):  # noqa: F811
    voucher = make_voucher(stock=STOCK, strategy=strategy, buckets=BUCKETS)
    assert [quantity for _, quantity, _, _ in rows_of(voucher)] == [2, 2, 2, 2, 1, 1, 1, 1]

    outcome = buy_concurrently(voucher_id=voucher.pk, plan=crowd, race_ms=30)
    if strategy == "redis_lua":
        persist_voucher(voucher)

    assert not outcome.unexpected, outcome.unexpected
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree and audit.ok, audit
    assert (audit.oversold, audit.duplicates) == (0, 0)
    if strategy in QUEUEING:
        # Demand (28 buyers) exceeds supply: nobody was refused while a unit sat in a bucket.
        assert (audit.orders, audit.stock) == (STOCK, 0), audit
        assert sum(outcome.refusals.values()) == BUYERS + 4 - STOCK
    else:
        assert audit.orders + audit.stock == STOCK
    per_row = orders_per_row(voucher)
    for stock_id, quantity, taken, initial in Stock.objects.filter(group_id=voucher.group_id).values_list(
        "id", "quantity", "taken", "initial_quantity"
    ):
        assert quantity >= 0 and taken == per_row[stock_id] and quantity + taken == initial
    if strategy == "redis_lua":
        assert sum(reservations_client().stock(group_id=voucher.group_id).values()) == audit.stock


@pytest.mark.race
@pytest.mark.parametrize("strategy", GUARDED)
def test_released_units_go_back_once_to_the_bucket_they_came_from(strategy, make_voucher, make_user):
    voucher = windowed(make_voucher(stock=16, strategy=strategy, buckets=BUCKETS))
    users = [make_user() for _ in range(16)]
    orders = [buy(voucher, user) for user in users]
    assert len({order.stock_id for order in orders}) > 1  # the buyers were spread over buckets
    before = {
        stock_id: quantity
        for stock_id, quantity in Stock.objects.filter(group_id=voucher.group_id).values_list("id", "quantity")
    }

    # Payments, cancels and expiries of every order at once, then sweeps of those left held: the
    # last six, and any of the first ten whose every change was refused busy (a lock strategy
    # on a slow database may refuse all three; nothing was written then).
    outcome = change_concurrently(orders[:10], processes=4, race_ms=20)
    assert outcome.errors == []
    Order.objects.filter(voucher=voucher, status=Order.Status.HELD).update(hold_until=timezone.now())
    swept = act_concurrently(
        act=lambda _: holds_expire_due(VOUCHER, item_id=voucher.pk, batch=2), plan=[[0], [1], [2]], race_ms=10
    )
    assert swept.errors == []
    while holds_expire_due(VOUCHER, item_id=voucher.pk):
        pass

    released = orders_per_row(voucher, status__in=[Order.Status.CANCELLED, Order.Status.EXPIRED])
    for stock_id, quantity in Stock.objects.filter(group_id=voucher.group_id).values_list("id", "quantity"):
        assert quantity == before[stock_id] + released[stock_id], (stock_id, before, released)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree and audit.ok and audit.conserved, audit
    assert audit.holds.returned_twice == 0 and audit.holds.held == 0


def test_a_buyer_is_sold_a_unit_of_the_home_bucket(make_voucher, make_user):
    voucher = make_voucher(stock=80, buckets=BUCKETS, strategy="db_pessimistic")
    user = make_user()
    order = buy(voucher, user)
    assert Stock.objects.get(pk=order.stock_id).bucket == home_bucket(user.pk, BUCKETS)


def test_the_api_echoes_buckets_and_refuses_them_out_of_range(api_client):
    staff = api_client(staff=True)
    made = post_json(staff, "/api/admin/vouchers", voucher_body(buckets=4))
    assert made.status_code == 201, made.content
    assert (made.json()["buckets"], made.json()["stock"]) == (4, 10)
    assert staff.get(f"/api/vouchers/{made.json()['id']}").json()["buckets"] == 4
    assert post_json(staff, "/api/admin/vouchers", voucher_body()).json()["buckets"] == 1
    for wrong in (0, 65, "2", 1.5):
        assert post_json(staff, "/api/admin/vouchers", voucher_body(buckets=wrong)).status_code == 422, wrong
    assert Stock.objects.filter(group__voucher__title="Staff voucher").count() == 4 + 1  # nothing from the refused
    split = patch_json(staff, f"/api/admin/vouchers/{made.json()['id']}", {"buckets": 6})
    assert split.status_code == 200 and (split.json()["buckets"], split.json()["stock"]) == (6, 10), split.content
    assert patch_json(staff, f"/api/admin/vouchers/{made.json()['id']}", {"buckets": 65}).status_code == 422


def units_per_bucket(voucher) -> list[int]:
    return [quantity for _, quantity, _, _ in rows_of(voucher)]


def test_a_split_into_fewer_buckets_that_would_pass_a_rows_supply_bound_is_refused_whole(make_voucher, api_client):
    """Two rows each supplied the most a row may be: gathered into one, the row passed the bound
    that a restock keeps (an integer column's overflow, a 500, a few more restocks on)."""
    voucher = make_voucher(stock=MAX_UNITS, strategy="db_atomic", buckets=2)
    voucher_update(voucher=voucher_get(voucher_id=voucher.pk), restock=MAX_UNITS)
    assert units_per_bucket(voucher) == [MAX_UNITS, MAX_UNITS]
    assert_error(
        patch_json(api_client(staff=True), f"/api/admin/vouchers/{voucher.pk}", {"buckets": 1}), 409, "supply_limit"
    )
    assert units_per_bucket(voucher) == [MAX_UNITS, MAX_UNITS] and voucher_get(voucher_id=voucher.pk).buckets == 2


@pytest.mark.parametrize("strategy", SAFE)
def test_a_voucher_split_again_keeps_every_unit_and_sells_them_all(strategy, make_voucher, make_user):
    voucher = windowed(make_voucher(stock=20, strategy=strategy, buckets=4))
    first = [buy(voucher, make_user()) for _ in range(5)]

    voucher_update(voucher=voucher_get(voucher_id=voucher.pk), buckets=8)
    assert units_per_bucket(voucher) == [2, 2, 2, 2, 2, 2, 2, 1]
    voucher_update(voucher=voucher_get(voucher_id=voucher.pk), buckets=2)
    assert units_per_bucket(voucher) == [8, 7, 0, 0, 0, 0, 0, 0]  # the rows beyond stay, empty
    assert voucher_get(voucher_id=voucher.pk).buckets == 2
    if strategy == "redis_lua":
        assert not item_reservations_check(VOUCHER, item=voucher_get(voucher_id=voucher.pk)).drifted

    # A unit released now goes back to its row, wherever that is, and is still sold.
    order_cancel(order=Order.objects.get(pk=first[0].pk))
    buyers = [make_user() for _ in range(20)]
    sold = []
    for user in buyers:
        try:
            sold.append(buy(voucher, user))
        except SoldOut:
            break
    assert len(sold) == 16  # 15 left after the first 5, and the one released
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree and audit.ok and audit.conserved, audit
    assert audit.stock == 0 and audit.holds.released == 1
    assert Order.objects.filter(voucher=voucher).exclude(status=Order.Status.CANCELLED).count() == 20
    for _, quantity, taken, initial in rows_of(voucher):
        assert quantity == 0 and taken == initial
    if strategy == "redis_lua":
        assert not item_reservations_check(VOUCHER, item=voucher_get(voucher_id=voucher.pk)).drifted


@pytest.mark.race
@pytest.mark.parametrize("strategy", [name for name in QUEUEING if not STRATEGIES[name].deferred])
def test_buckets_changed_mid_sale_lose_and_double_nothing(strategy, make_voucher, make_user):
    voucher = make_voucher(stock=STOCK, strategy=strategy, buckets=4)
    users = [make_user().pk for _ in range(BUYERS)]
    plan = [[("buy", user) for user in users[n::4]] for n in range(4)]
    plan[0].append(("split", 8))
    plan[1].append(("split", 3))

    def act(slot):
        action, value = slot
        if action == "split":
            voucher_update(voucher=voucher_get(voucher_id=voucher.pk), buckets=value)
            return 0
        return order_purchase(user=get_user_model()(pk=value), voucher=voucher_get(voucher_id=voucher.pk)).public_id

    outcome = act_concurrently(act=act, plan=plan, race_ms=20)

    assert not outcome.unexpected, outcome.unexpected
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.totals_agree and audit.ok, audit
    assert (audit.orders, audit.stock, audit.oversold, audit.duplicates) == (STOCK, 0, 0, 0)
    assert sum(initial for _, _, _, initial in rows_of(voucher)) == STOCK
