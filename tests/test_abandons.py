"""The cap on the holds one user abandons of an item and the cooldown after each
(``inventory.abandons``), on every guarded strategy, ``redis_lua`` included: the refusals,
the cooldown on an injected clock, many processes of one user racing against the cap, and
the API's fields and answers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from core.errors import DomainError
from inventory.buckets import home_bucket
from inventory.errors import AbandonLimit, CoolingDown, HoldClosed, LockBusy
from inventory.holds import hold_release, holds_expire_due
from inventory.models import Abandoned
from inventory.redis_lua.bucket_states import item_states
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_load, item_reservations_reconcile
from inventory.redis_lua.values import GroupKeys
from lottery.models import Draw
from lottery.product import POOL
from lottery.selectors import draw_get, pool_get
from lottery.services import pool_draw, pool_update
from orders.models import Order, Voucher
from orders.product import VOUCHER
from orders.selectors import order_get, voucher_get
from orders.services import order_cancel, order_purchase
from tests.stock import stock_left

from .buyers import act_concurrently
from .http import assert_error, patch_json, post_json
from .test_holds import EVERY, GUARDED, buy, windowed
from .test_idempotency import keys  # noqa: F401 (autouse: no key or rate counter of an earlier test)
from .test_redis_lua import persist_pool

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]


@pytest.fixture
def strategy(request):
    """The strategy of the test's parameter, with what it needs (Redlock's servers)."""
    if request.param == "redlock":
        request.getfixturevalue("redlock_urls")
    return request.param


def capped(make_voucher, *, limit: int, cooldown: int, **voucher) -> Voucher:
    """A voucher with a payment window, the cap and the cooldown given from the start (a
    ``redis_lua`` one's state loaded with them)."""
    return windowed(make_voucher(abandon_limit=limit, abandon_cooldown_seconds=cooldown, **voucher))


def refusal(voucher: Voucher, user, **take) -> DomainError:
    with pytest.raises(DomainError) as refused:
        order_purchase(user=user, voucher=voucher_get(voucher_id=voucher.pk), **take)
    return refused.value


def cancel(user, order: Order, **when) -> None:
    order_cancel(order=order_get(user=user, order_id=order.public_id), **when)


@pytest.mark.parametrize(
    ("strategy", "buckets"),
    [*((name, 1) for name in EVERY), ("redis_lua", 4), ("db_atomic", 4)],
    indirect=["strategy"],
)
def test_past_the_cap_a_buyer_is_refused_and_everyone_else_still_buys(make_voucher, make_user, strategy, buckets):
    """A cancel and an expiry each count; at the cap the buyer is refused with the unit on
    sale, and someone else buys it. ``none`` and ``local`` check alike, one request at a time;
    a bucketed ``redis_lua`` voucher keeps the counts in each user's home state."""
    voucher = capped(make_voucher, limit=2, cooldown=0, stock=buckets, strategy=strategy, buckets=buckets)
    hoarder, honest = make_user(), make_user()

    cancel(hoarder, buy(voucher, hoarder))
    buy(voucher, hoarder)
    assert holds_expire_due(VOUCHER, item_id=voucher.pk, now=timezone.now() + timedelta(seconds=61)) == 1

    assert isinstance(refusal(voucher, hoarder), AbandonLimit)
    assert stock_left(voucher) == buckets
    assert Abandoned.objects.get(group_id=voucher.group_id, user=hoarder).holds == 2
    assert buy(voucher, honest).status == Order.Status.HELD
    assert Order.objects.filter(user=hoarder).count() == 2


@pytest.mark.parametrize("strategy", GUARDED, indirect=True)
def test_within_the_cooldown_a_buyer_is_refused_until_it_has_passed(make_voucher, make_user, strategy):
    """The clock of the releases is injected: one 30 s ago still cools, one 61 s ago does not
    (``redis_lua`` checks against Redis' own clock, the others against the request's)."""
    voucher = capped(make_voucher, limit=0, cooldown=60, stock=2, strategy=strategy)
    lately, long_ago = make_user(), make_user()
    now = timezone.now()
    cancel(lately, buy(voucher, lately), now=now - timedelta(seconds=30))
    cancel(long_ago, buy(voucher, long_ago), now=now - timedelta(seconds=61))

    refused = refusal(voucher, lately)
    assert isinstance(refused, CoolingDown)
    assert 25 <= refused.retry_after <= 31
    assert buy(voucher, long_ago).status == Order.Status.HELD
    assert stock_left(voucher) == 1


def test_a_load_of_a_state_already_live_leaves_its_counts_alone(make_voucher, make_user):
    """Two rebuilds of one lost state (a take's and the beat's): the second's LOAD finds the
    state live and loads nothing, but its counts were emptied and written from the database
    first, and a take in between found none for its user."""
    voucher = capped(make_voucher, limit=1, cooldown=0, stock=2, strategy="redis_lua")
    hoarder = make_user()
    cancel(hoarder, buy(voucher, hoarder))
    redis = reservations_client()
    abandoned = GroupKeys.of(voucher.group_id).abandoned
    redis.client.hset(abandoned, str(hoarder.pk), "1:1")  # the live state's own, not the database's
    assert not item_reservations_load(VOUCHER, item=voucher_get(voucher_id=voucher.pk))
    assert redis.client.hget(abandoned, str(hoarder.pk)) == b"1:1"
    assert isinstance(refusal(voucher, hoarder), AbandonLimit)


@pytest.mark.parametrize("strategy", ["db_atomic", "db_pessimistic", "redis_lock"], indirect=True)
def test_the_take_clock_decides_the_cooldown(make_voucher, make_user, strategy):
    """A take in the request checks the cooldown at its own ``now``, injected here."""
    voucher = capped(make_voucher, limit=0, cooldown=60, stock=1, strategy=strategy)
    buyer = make_user()
    released = timezone.now()
    cancel(buyer, buy(voucher, buyer), now=released)

    assert refusal(voucher, buyer, now=released + timedelta(seconds=59)).retry_after == 1
    later = order_purchase(user=buyer, voucher=voucher_get(voucher_id=voucher.pk), now=released + timedelta(seconds=60))
    assert later.status == Order.Status.HELD


@pytest.mark.parametrize("strategy", GUARDED, indirect=True)
def test_a_pools_forfeited_prizes_count_against_its_cap(make_pool, make_user, strategy):
    pool = make_pool(strategy=strategy, prizes=(("Gold", 5),), draws_per_user=5)
    # Through the service: a redis_lua pool's state takes the new rules with the database.
    pool_update(pool=pool, hold_seconds=60, abandon_limit=1, abandon_cooldown_seconds=0)
    pool = pool_get(pool_id=pool.pk)
    player = make_user()
    drawn = pool_draw(user=player, pool=pool)
    if drawn.status == Draw.Status.PENDING:
        persist_pool(pool)
    draw = draw_get(user=player, draw_id=drawn.public_id)
    hold_release(POOL, draw, target=Draw.Status.FORFEITED)

    with pytest.raises(AbandonLimit):
        pool_draw(user=player, pool=pool_get(pool_id=pool.pk))


@pytest.mark.parametrize("buckets", [1, 4])
def test_redis_lua_keeps_the_databases_counts_through_a_lost_return_and_a_rebuild(make_voucher, make_user, buckets):
    """Redis' counts are the database's: a return that missed Redis is made whole by the
    reconciliation, and a state rebuilt from the database carries them; a bucketed item's
    in the user's home state, where its take reads them."""
    voucher = capped(make_voucher, limit=1, cooldown=0, stock=buckets, strategy="redis_lua", buckets=buckets)
    hoarder = make_user()
    cancel(hoarder, buy(voucher, hoarder))
    assert isinstance(refusal(voucher, hoarder), AbandonLimit)
    redis = reservations_client()
    states = item_states(voucher.group_id, buckets) if buckets > 1 else [voucher.group_id]
    home = states[home_bucket(hoarder.pk, buckets)]
    abandoned = GroupKeys.of(home).abandoned
    assert redis.client.hget(abandoned, str(hoarder.pk)).decode().startswith("1:")

    redis.client.delete(abandoned)  # as if the release's return never reached Redis
    item_reservations_reconcile(VOUCHER, item=voucher_get(voucher_id=voucher.pk))
    assert isinstance(refusal(voucher, hoarder), AbandonLimit)

    redis.drop(group_id=home)
    redis.client.delete(abandoned)
    item_reservations_reconcile(VOUCHER, item=voucher_get(voucher_id=voucher.pk))  # rebuilt
    assert isinstance(refusal(voucher, hoarder), AbandonLimit)
    assert redis.client.hget(abandoned, str(hoarder.pk)).decode().startswith("1:")


@pytest.mark.parametrize("strategy", ["db_atomic", "db_pessimistic", "redis_lock"], indirect=True)
def test_one_user_racing_from_many_processes_cannot_pass_the_cap(make_voucher, make_user, strategy):
    """Six processes of two threads each, all one user, buy and cancel as fast as they can:
    no more holds are taken than the cap allows abandoning, and each was counted."""
    voucher = capped(make_voucher, limit=2, cooldown=0, stock=3, strategy=strategy)
    user_id = make_user().pk

    def hoard(_slot) -> int:
        user = get_user_model().objects.get(pk=user_id)
        taken = 0
        for _ in range(6):
            try:
                order = order_purchase(user=user, voucher=voucher_get(voucher_id=voucher.pk))
            except AbandonLimit:
                break
            except DomainError:  # already_purchased, busy: another thread of the user holds one
                continue
            taken += 1
            while True:  # a cancel that met another thread's lock of the user (busy) is sent again
                try:
                    order_cancel(order=order)
                except LockBusy:
                    continue
                except HoldClosed:
                    pass
                break
        return taken

    outcome = act_concurrently(act=hoard, plan=[[0, 1]] * 6, race_ms=5)

    assert not outcome.errors, outcome.errors
    orders = Order.objects.filter(user_id=user_id)
    assert sum(outcome.confirmed) == orders.count() <= 2
    assert Abandoned.objects.get(group_id=voucher.group_id, user_id=user_id).holds == orders.count()
    assert stock_left(voucher) == 3
    with pytest.raises(AbandonLimit):
        order_purchase(user=get_user_model().objects.get(pk=user_id), voucher=voucher_get(voucher_id=voucher.pk))


# The API: the fields on create, patch and every read, and the refusals as declared.


def test_staff_set_the_cap_and_the_cooldown_and_every_read_shows_them(api_client):
    staff = api_client(staff=True)
    begin = timezone.now()
    window = {"begin_at": begin.isoformat(), "end_at": (begin + timedelta(hours=1)).isoformat()}
    made = post_json(staff, "/api/admin/vouchers", {"title": "Capped", "stock": 1, **window})
    assert made.status_code == 201, made.content
    assert (made.json()["abandon_limit"], made.json()["abandon_cooldown_seconds"]) == (2, 60)
    voucher_id = made.json()["id"]
    changed = patch_json(
        staff, f"/api/admin/vouchers/{voucher_id}", {"abandon_limit": 0, "abandon_cooldown_seconds": 5}
    )
    assert (changed.json()["abandon_limit"], changed.json()["abandon_cooldown_seconds"]) == (0, 5)
    assert Client().get(f"/api/vouchers/{voucher_id}").json()["abandon_cooldown_seconds"] == 5
    assert_error(patch_json(staff, f"/api/admin/vouchers/{voucher_id}", {"abandon_limit": -1}), 422, "invalid")

    body = {"name": "Capped pool", "draws_per_user": 1, "no_prize_weight": 0, "abandon_limit": 3, **window}
    pool = post_json(staff, "/api/admin/pools", body)
    assert pool.status_code == 201, pool.content
    assert (pool.json()["abandon_limit"], pool.json()["abandon_cooldown_seconds"]) == (3, 60)
    pool_id = pool.json()["id"]
    assert (
        patch_json(staff, f"/api/admin/pools/{pool_id}", {"abandon_cooldown_seconds": 0}).json()[
            "abandon_cooldown_seconds"
        ]
        == 0
    )


def test_the_api_refuses_409_abandon_limit_and_429_cooling_down_with_retry_after(api_client, make_voucher):
    voucher = capped(make_voucher, limit=2, cooldown=60, stock=1)
    buyer = api_client()
    purchase = f"/api/vouchers/{voucher.pk}/purchase"
    order_id = buyer.post(purchase).json()["order_id"]
    assert buyer.post(f"/api/orders/{order_id}/cancel").status_code == 200

    cooling = buyer.post(purchase)
    assert_error(cooling, 429, "cooling_down")
    assert 55 <= int(cooling["Retry-After"]) <= 60

    Abandoned.objects.filter(group_id=voucher.group_id).update(holds=2)
    assert_error(buyer.post(purchase), 409, "abandon_limit")


def test_staff_change_the_cap_and_the_cooldown_in_the_admin_and_a_bad_one_is_a_form_error(admin_client_, make_voucher):
    voucher = make_voucher(title="Capped", strategy="redis_lua")
    begin = timezone.now()
    form = {
        "title": "Capped",
        "description": "",
        "begin_at_0": begin.strftime("%Y-%m-%d"),
        "begin_at_1": begin.strftime("%H:%M:%S"),
        "end_at_0": (begin + timedelta(days=1)).strftime("%Y-%m-%d"),
        "end_at_1": begin.strftime("%H:%M:%S"),
        "strategy": "redis_lua",
    }
    url = f"/admin/orders/voucher/{voucher.pk}/change/"
    assert 'name="abandon_limit"' in admin_client_.get(url).content.decode()

    changed = admin_client_.post(url, form | {"abandon_limit": "5", "abandon_cooldown_seconds": "0"})
    assert changed.status_code == 302, changed.content
    voucher.refresh_from_db()
    assert (voucher.abandon_limit, voucher.abandon_cooldown_seconds) == (5, 0)
    # Left out of the form: kept as they are.
    assert admin_client_.post(url, form).status_code == 302
    voucher.refresh_from_db()
    assert (voucher.abandon_limit, voucher.abandon_cooldown_seconds) == (5, 0)

    refused = admin_client_.post(url, form | {"abandon_cooldown_seconds": "86401"})
    assert refused.status_code == 200
    assert list(refused.context["adminform"].form.errors) == ["abandon_cooldown_seconds"]
