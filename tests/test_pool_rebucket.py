"""A prize pool split again while it draws (``pool_update(buckets=)``, ``PATCH buckets``): each
prize's units left spread over the new count, none moved from one prize to another; the rows
beyond a smaller count kept, empty, and a unit released to one of them still won; draws by
many processes while the count changes lose and double nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from inventory.buckets import units_spread
from inventory.errors import RowsLocked
from inventory.holds import holds_expire_due
from inventory.models import Stock
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_check
from inventory.strategies import STRATEGIES
from lottery.errors import PoolEmpty
from lottery.models import Draw, Pool
from lottery.product import POOL
from lottery.selectors import pool_audit, pool_get
from lottery.services import pool_draw, pool_update, prize_update

from .buyers import act_concurrently
from .http import patch_json
from .stock import stock_rows_held
from .test_bucketed_draws import PRIZES, QUEUEING, SAFE, SUPPLY, assert_each_row_counts_its_draws, rows_of
from .test_holds import draw

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redlock_urls", "reservations_redis")]


def split(pool, buckets: int) -> Pool:
    return pool_update(pool=pool_get(pool_id=pool.pk), buckets=buckets)


def left_per_prize(pool) -> dict[str, int]:
    return {name: sum(rows) for name, rows in rows_of(pool).items()}


def draw_out(pool, make_user) -> int:
    """Draw with new users until the pool is empty; the draws made."""
    made = 0
    while True:
        try:
            draw(pool, make_user())
        except PoolEmpty:
            return made
        made += 1
        assert made <= SUPPLY


def assert_whole(pool, strategy: str) -> None:
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree and audit.ok and audit.conserved, audit
    assert_each_row_counts_its_draws(pool)
    if strategy == "redis_lua":
        assert not item_reservations_check(POOL, item=pool_get(pool_id=pool.pk)).drifted
        rows = dict(Stock.objects.filter(group_id=pool.group_id).values_list("id", "quantity"))
        assert reservations_client().stock(group_id=pool.group_id) == rows


@pytest.mark.parametrize("strategy", SAFE)
def test_a_pool_split_again_keeps_each_prizes_units_and_draws_them_all(strategy, make_pool, make_user):
    pool = make_pool(strategy=strategy, prizes=PRIZES, draws_per_user=1, buckets=4)
    for _ in range(3):
        draw(pool, make_user())
    left = left_per_prize(pool)
    assert sum(left.values()) == SUPPLY - 3

    split(pool, 8)
    assert rows_of(pool) == {name: units_spread(units, 8) for name, units in left.items()}
    split(pool, 2)
    assert rows_of(pool) == {name: units_spread(units, 2) + [0] * 6 for name, units in left.items()}  # rows beyond stay
    assert pool_get(pool_id=pool.pk).buckets == 2
    assert_whole(pool, strategy)

    assert draw_out(pool, make_user) == SUPPLY - 3
    audit = pool_audit(pool_id=pool.pk)
    assert (audit.stock, audit.awarded) == (0, SUPPLY)
    assert {prize.name: prize.awarded for prize in audit.prizes} == dict(PRIZES)
    assert_whole(pool, strategy)


@pytest.mark.parametrize("strategy", SAFE)
def test_a_prize_released_to_a_row_beyond_a_smaller_count_is_still_won(strategy, make_pool, make_user):
    """4 units in 4 buckets, all won (one from each bucket), the pool split into 2, then the
    draw from bucket 3 forfeited: its unit goes back to its row, beyond the count, and the
    next draw wins it there."""
    pool = make_pool(strategy=strategy, prizes=(("Gold", 4),), draws_per_user=1, buckets=4)
    Pool.objects.filter(pk=pool.pk).update(hold_seconds=60)
    won = [draw(pool, make_user()) for _ in range(4)]
    by_bucket = {Stock.objects.get(pk=one.stock_id).bucket: one for one in won}
    assert sorted(by_bucket) == [0, 1, 2, 3]

    split(pool, 2)
    Draw.objects.filter(pk=by_bucket[3].pk).update(hold_until=timezone.now())
    assert holds_expire_due(POOL, item_id=pool.pk) == 1
    assert rows_of(pool) == {"Gold": [0, 0, 0, 1]}

    again = draw(pool, make_user())
    assert again.stock_id == by_bucket[3].stock_id
    assert rows_of(pool) == {"Gold": [0, 0, 0, 0]}
    assert_whole(pool, strategy)


def test_a_restock_after_a_smaller_count_fills_only_the_rows_within_it(make_pool):
    pool = make_pool(prizes=(("Gold", 4),), buckets=4)
    split(pool, 2)
    assert rows_of(pool) == {"Gold": [2, 2, 0, 0]}
    prize_update(prize=pool_get(pool_id=pool.pk).prizes.get(), restock=3)
    assert rows_of(pool) == {"Gold": [4, 3, 0, 0]}


@pytest.mark.race
@pytest.mark.parametrize("strategy", [name for name in QUEUEING if not STRATEGIES[name].deferred])
def test_buckets_changed_while_many_processes_draw_lose_and_double_nothing(strategy, make_pool, make_user):
    """28 users draw once each for 12 units over 4 processes, while two of them split the
    pool into 8 and into 3; then the units left are drawn out."""
    pool = make_pool(strategy=strategy, prizes=PRIZES, draws_per_user=1, buckets=4)
    users = [make_user().pk for _ in range(28)]
    plan = [[("draw", user) for user in users[n::4]] for n in range(4)]
    plan[0].append(("split", 8))
    plan[1].append(("split", 3))

    def act(slot):
        action, value = slot
        if action == "split":
            split(pool, value)
            return 0
        return pool_draw(user=get_user_model()(pk=value), pool=pool_get(pool_id=pool.pk)).public_id

    outcome = act_concurrently(act=act, plan=plan, race_ms=20)

    assert not outcome.unexpected, outcome.unexpected
    assert pool_get(pool_id=pool.pk).buckets in (8, 3)
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree and audit.ok and audit.conserved, audit
    assert audit.stock + audit.awarded == SUPPLY and audit.over_awarded == 0
    assert {prize.name: prize.stock + prize.awarded for prize in audit.prizes} == dict(PRIZES)
    assert_each_row_counts_its_draws(pool)
    # A draw that lost its bounded retries to the crowd may have heard busy: what is left
    # is still won, wherever it sits.
    draw_out(pool, make_user)
    audit = pool_audit(pool_id=pool.pk)
    assert (audit.stock, audit.awarded) == (0, SUPPLY) and audit.ok, audit
    assert {prize.name: prize.awarded for prize in audit.prizes} == dict(PRIZES)


def test_a_split_does_not_wait_for_a_row_a_take_holds(make_pool):
    """A take holds a row it found empty while it writes another (a draw choosing again in
    its transaction): a split that waited for rows in its own order could deadlock with it.
    The split locks without waiting, rolls back and tries again; told busy, with nothing
    changed, when the row stays held through every try, and made once it is let go."""
    pool = make_pool(prizes=(("Gold", 4), ("Silver", 4)), buckets=2)
    before = rows_of(pool)
    with stock_rows_held(Stock.objects.filter(group_id=pool.group_id).latest("id").pk):
        with pytest.raises(RowsLocked):
            split(pool, 4)
        assert (pool_get(pool_id=pool.pk).buckets, rows_of(pool)) == (2, before)
    split(pool, 4)
    assert rows_of(pool) == {"Gold": [1, 1, 1, 1], "Silver": [1, 1, 1, 1]}


def test_the_api_splits_a_pool_again_and_refuses_a_count_out_of_range(api_client, make_pool):
    staff = api_client(staff=True)
    pool = make_pool(prizes=(("Gold", 10), ("Silver", 3)), buckets=4)
    changed = patch_json(staff, f"/api/admin/pools/{pool.pk}", {"buckets": 6})
    assert changed.status_code == 200, changed.content
    assert changed.json()["buckets"] == 6
    assert {prize["name"]: prize["stock"] for prize in changed.json()["prizes"]} == {"Gold": 10, "Silver": 3}
    assert rows_of(pool) == {"Gold": [2, 2, 2, 2, 1, 1], "Silver": [1, 1, 1, 0, 0, 0]}
    for wrong in (0, 65, "2", 1.5):
        assert patch_json(staff, f"/api/admin/pools/{pool.pk}", {"buckets": wrong}).status_code == 422, wrong
    assert pool_get(pool_id=pool.pk).buckets == 6
