"""A prize pool split into buckets (``inventory.buckets``), drawn by many processes at once under
every safe strategy: each prize is awarded at most its supply, from the row it sat in, and no
user passes the draw limit across buckets; when demand exceeds supply every unit is won, with
no ``pool_empty`` while a bucket has stock; a forfeited or expired prize goes back, once, to
its row. Its API answers say how many buckets it has. The odds: tests/lottery/test_bucketed_odds.py."""

from __future__ import annotations

from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Count, F
from django.urls import reverse
from django.utils import timezone

from inventory.holds import holds_expire_due
from inventory.models import Stock
from inventory.redis_lua.client import reservations_client
from inventory.strategies import STRATEGIES, strategy_names
from lottery.errors import PoolEmpty
from lottery.models import Draw, Pool
from lottery.product import POOL, prize_for_stock, prizes_of_rows
from lottery.selectors import draw_get, pool_audit, pool_get
from lottery.services import draw_claim, pool_draw

from .buyers import act_concurrently, draw_concurrently
from .http import post_json
from .lottery.test_concurrency import crowd  # noqa: F401  (the fixture: 11 users over 8 processes x 4 threads)
from .test_api import voucher_body
from .test_holds import draw, strategy  # noqa: F401  (the fixture: the strategy with what it needs)
from .test_redis_lua import persist_pool

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redlock_urls", "reservations_redis")]

SAFE = strategy_names(breaks=None)
GUARDED = [name for name in strategy_names() if STRATEGIES[name].guarded]
QUEUEING = [name for name in SAFE if not STRATEGIES[name].sheds_load]
BUCKETS = 4
PRIZES = (("Gold", 3), ("Silver", 5), ("Bronze", 4))
SUPPLY = 12  # fewer than the 22 draws the crowd may make (11 users, 2 each)
LIMIT = 2


def rows_of(pool) -> dict[str, list[int]]:
    """Each prize's rows' quantities, by bucket."""
    rows = Stock.objects.filter(group_id=pool.group_id).order_by("bucket")
    shares: dict[str, list[int]] = {}
    for name, quantity in rows.values_list("head__prize__name", "quantity"):
        shares.setdefault(name, []).append(quantity)
    return shares


def assert_each_row_counts_its_draws(pool) -> None:
    """Every row: stock never negative, its running total the draws holding its units, and
    stock + those draws its supply; every draw's prize is the prize its row is a share of."""
    holding = Draw.objects.filter(pool=pool, status__in=[Draw.Status.CONFIRMED, Draw.Status.HELD, Draw.Status.CLAIMED])
    per_row = Counter(dict(holding.values("stock_id").annotate(n=Count("id")).values_list("stock_id", "n")))
    for stock_id, quantity, taken, initial in Stock.objects.filter(group_id=pool.group_id).values_list(
        "id", "quantity", "taken", "initial_quantity"
    ):
        assert quantity >= 0 and taken == per_row[stock_id] and quantity + taken == initial, stock_id
    mismatched = Draw.objects.filter(pool=pool, prize__isnull=False).exclude(stock__head_id=F("prize__stock_id"))
    assert not mismatched.exists()


@pytest.mark.race
@pytest.mark.parametrize("strategy_name", SAFE)
def test_a_bucketed_pool_awards_each_prize_once_within_the_limit_across_buckets(strategy_name, make_pool, crowd):  # noqa: F811
    pool = make_pool(prizes=PRIZES, draws_per_user=LIMIT, strategy=strategy_name, buckets=BUCKETS)
    assert rows_of(pool) == {"Gold": [1, 1, 1, 0], "Silver": [2, 1, 1, 1], "Bronze": [1, 1, 1, 1]}

    outcome = draw_concurrently(pool_id=pool.pk, plan=crowd, race_ms=30)
    if strategy_name == "redis_lua":
        persist_pool(pool)

    assert not outcome.unexpected, outcome.unexpected
    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree and audit.ok, audit
    assert (audit.over_awarded, audit.users_over_limit, audit.stock + audit.awarded) == (0, 0, SUPPLY)
    recorded = {one.public_id: one.prize_id for one in Draw.objects.filter(pool=pool)}
    assert dict(outcome.confirmed) == recorded and len(outcome.confirmed) == len(recorded)
    if audit.stock > 0:  # no draw was told the pool was empty while a unit sat in a bucket
        assert outcome.refusals["pool_empty"] == 0, outcome.refusals
    assert_each_row_counts_its_draws(pool)
    if strategy_name == "redis_lua":
        assert sum(reservations_client().stock(group_id=pool.group_id).values()) == audit.stock


@pytest.mark.race
@pytest.mark.parametrize("strategy_name", QUEUEING)
def test_when_demand_exceeds_supply_every_prize_in_every_bucket_is_won(strategy_name, make_pool, make_user):
    """24 users draw once each, all at once, for 12 units in 4 buckets, no prize weighing
    nothing: every unit is won, wherever it sat; the 12 after are refused."""
    pool = make_pool(prizes=PRIZES, draws_per_user=1, strategy=strategy_name, buckets=BUCKETS)
    users = [make_user().pk for _ in range(24)]
    outcome = draw_concurrently(pool_id=pool.pk, plan=[users[p::8] for p in range(8)], race_ms=30)
    if strategy_name == "redis_lua":
        persist_pool(pool)
    assert not outcome.unexpected, outcome.unexpected
    audit = pool_audit(pool_id=pool.pk)
    assert audit.ok and (audit.awarded, audit.stock) == (SUPPLY, 0), audit
    # Every unit won, so nobody was refused while one sat in a bucket; a draw that lost its
    # bounded retries to the crowd (db_atomic's, a lock's wait) may hear busy instead.
    assert sum(outcome.refusals.values()) == 24 - SUPPLY, outcome.refusals
    assert set(outcome.refusals) <= {"pool_empty", "busy"}, outcome.refusals
    assert_each_row_counts_its_draws(pool)


def test_pool_empty_is_answered_only_once_every_bucket_is_empty(make_pool, make_user):
    """With a weight of no prize a bucket without stock still draws (no prize): a draw is
    refused ``pool_empty`` only when no bucket holds a unit."""
    pool = make_pool(prizes=(("Gold", 2), ("Silver", 3)), no_prize_weight=3, draws_per_user=10_000, buckets=8)
    user = make_user()
    draws = 0
    while True:
        try:
            pool_draw(user=user, pool=pool_get(pool_id=pool.pk))
        except PoolEmpty:
            break
        draws += 1
        assert draws < 5_000
    audit = pool_audit(pool_id=pool.pk)
    assert (audit.stock, audit.awarded, audit.ok) == (0, 5, True), audit
    assert audit.no_prize_draws == draws - 5


@pytest.mark.race
@pytest.mark.parametrize("strategy", GUARDED, indirect=True)
def test_forfeits_and_expiries_return_each_prize_once_to_its_row(make_pool, make_user, strategy):  # noqa: F811
    pool = make_pool(strategy=strategy, prizes=(("Gold", 6), ("Silver", 6)), draws_per_user=1, buckets=BUCKETS)
    Pool.objects.filter(pk=pool.pk).update(hold_seconds=60)
    pool = pool_get(pool_id=pool.pk)
    winners = [make_user() for _ in range(12)]
    draws = [draw(pool, winner) for winner in winners]
    assert len({one.stock_id for one in draws}) > 2  # drawn from several buckets
    Draw.objects.filter(pk__in=[one.pk for one in draws]).update(hold_until=timezone.now())

    def act(slot) -> int | str:
        if slot is None:  # a sweep, in batches of two
            released = 0
            while done := holds_expire_due(POOL, item_id=pool.pk, batch=2):
                released += done
            return released
        user_id, draw_id = slot
        return draw_claim(draw=draw_get(user=get_user_model()(pk=user_id), draw_id=draw_id)).status

    claims = [(winner.pk, won.public_id) for winner, won in zip(winners, draws, strict=True)]
    outcome = act_concurrently(act=act, plan=[[*claims[i::3], None] for i in range(3)], race_ms=10)
    assert outcome.errors == [] and set(outcome.refusals) <= {"forfeited", "busy"}, outcome
    holds_expire_due(POOL, item_id=pool.pk)  # what a busy claim left held

    audit = pool_audit(pool_id=pool.pk)
    assert audit.totals_agree and audit.ok, audit
    assert (audit.stock, audit.awarded, audit.holds.released, audit.holds.returned_twice) == (12, 0, 12, 0)
    assert rows_of(pool) == {"Gold": [2, 2, 1, 1], "Silver": [2, 2, 1, 1]}  # each unit in its own row
    assert_each_row_counts_its_draws(pool)
    if strategy == "redis_lua":
        rows = dict(Stock.objects.filter(group_id=pool.group_id).values_list("id", "quantity"))
        assert reservations_client().stock(group_id=pool.group_id) == rows


def pool_body(**overrides):
    times = {key: voucher_body()[key] for key in ("begin_at", "end_at")}
    return {"name": "Pool", "draws_per_user": 1, "no_prize_weight": 0, **times, **overrides}


def test_the_api_makes_bucketed_pools_echoes_buckets_and_refuses_them_out_of_range(api_client):
    staff = api_client(staff=True)
    made = post_json(staff, "/api/admin/pools", pool_body(buckets=4))
    assert made.status_code == 201 and made.json()["buckets"] == 4, made.content
    pool_id = made.json()["id"]
    prize = post_json(staff, f"/api/admin/pools/{pool_id}/prizes", {"name": "Gold", "stock": 10})
    assert prize.status_code == 201 and (prize.json()["stock"], prize.json()["initial_stock"]) == (10, 10), prize
    pool = Pool.objects.get(pk=pool_id)
    assert rows_of(pool) == {"Gold": [3, 3, 2, 2]}

    restocked = staff.patch(f"/api/admin/prizes/{prize.json()['id']}", {"restock": 5}, content_type="application/json")
    assert restocked.status_code == 200 and restocked.json()["stock"] == 15, restocked.content
    assert rows_of(pool) == {"Gold": [5, 4, 3, 3]}
    shown = staff.get(f"/api/pools/{pool_id}").json()
    assert shown["buckets"] == 4 and shown["prizes"][0]["stock"] == 15 and shown["prizes"][0]["probability"] == 1.0
    assert staff.get(f"/api/admin/pools/{pool_id}/audit").json()["ok"] is True

    for wrong in (0, 65, "2", 1.5):
        assert post_json(staff, "/api/admin/pools", pool_body(buckets=wrong)).status_code == 422, wrong
    assert post_json(staff, "/api/admin/pools", pool_body()).json()["buckets"] == 1
    assert Pool.objects.count() == 2  # nothing from the refused


def test_the_pages_show_each_prize_summed_over_its_buckets(client, make_pool, make_user):
    pool = make_pool(prizes=(("Gold", 3), ("Silver", 5)), no_prize_weight=2, buckets=BUCKETS)
    won = None
    while won is None:  # a prize won, from one of its rows
        won = pool_draw(user=make_user(), pool=pool_get(pool_id=pool.pk)).prize
    left = {"Gold": 3, "Silver": 5} | {won.name: {"Gold": 3, "Silver": 5}[won.name] - 1}
    page = client.get(reverse("lottery:pool_detail", args=[pool.pk])).content.decode()
    for prize in pool.prizes.all():
        supplied = {"Gold": 3, "Silver": 5}[prize.name]
        assert f'data-testid="prize-stock-{prize.pk}">{left[prize.name]} of {supplied} left' in page
    listed = client.get(reverse("lottery:pool_list")).content.decode()
    assert f'data-testid="pool-left-{pool.pk}">7 of 8' in listed


def test_any_row_of_a_prize_leads_to_the_prize(make_pool):
    """What a pending redis_lua draw announces, and what its worker writes, from the row taken."""
    pool = make_pool(prizes=(("Gold", 4), ("Silver", 4)), buckets=BUCKETS)
    for prize in pool.prizes.all():
        for row in Stock.objects.filter(head_id=prize.stock_id):
            named = prize_for_stock(stock_id=row.pk)
            assert (named.pk, named.name, named.stock_id) == (prize.pk, prize.name, prize.stock_id)
            assert prizes_of_rows(id=row.pk).get().pk == prize.pk
