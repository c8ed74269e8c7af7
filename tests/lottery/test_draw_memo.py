"""What a redis_lua draw answers from what the process keeps between draws: the pool, a
second (``inventory.items.item_for_take``), and the prize's name, five seconds (``prize_for_stock``).
Neither makes the answer wrong, nor can one draw change what the next is answered."""

from __future__ import annotations

import pytest

from inventory import items
from inventory.items import item_for_take
from lottery import product
from lottery.product import POOL, prize_for_stock
from lottery.selectors import pool_get
from lottery.services import pool_update

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]


def test_draws_left_follows_the_limit_the_script_enforced_not_the_memo(api_client, make_pool):
    pool = make_pool(strategy="redis_lua", draws_per_user=3, prizes=(("Gold", 50),))
    client = api_client()
    first = client.post(f"/api/pools/{pool.pk}/draw")
    assert (first.status_code, first.json()["draws_left"]) == (202, 2)
    kept = item_for_take(POOL, item_id=pool.pk)
    assert kept.draws_per_user == 3
    # Staff raise the limit in another process: Redis' rules change, this process's memo
    # (put back as that process found it) still says 3 for up to a second.
    pool_update(pool=pool_get(pool_id=pool.pk), draws_per_user=5)
    items._reserving.put(("pool", pool.pk), kept)
    second = client.post(f"/api/pools/{pool.pk}/draw")
    assert second.status_code == 202
    assert second.json()["draws_left"] == 3  # 5 - 2, where the memo's limit said 1


def test_each_draw_is_answered_a_prize_of_its_own(make_pool):
    pool = make_pool(strategy="redis_lua", prizes=(("Gold", 5),))
    (prize,) = pool.prizes.all()
    one = prize_for_stock(stock_id=prize.stock_id)
    one.name = "Changed by a caller"
    other = prize_for_stock(stock_id=prize.stock_id)
    assert other is not one
    assert (other.pk, other.name, other.stock_id) == (prize.pk, "Gold", prize.stock_id)
    assert other.value == prize.value  # a deferred field reads its row, as any model's does
    with pytest.raises(AttributeError):
        product._prizes.get(prize.stock_id).name = "nobody changes what is kept"
