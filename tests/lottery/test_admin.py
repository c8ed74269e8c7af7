"""Pools and prizes in the Django admin go through the lottery's services."""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta

import pytest
from django.utils import timezone

from inventory.models import Stock
from inventory.redis_lua import item_states
from lottery.models import Draw, Pool
from lottery.selectors import pool_audit, pool_get
from lottery.services import pool_draw
from tests.restock import fresh_once
from tests.stock import stock_rows_held

pytestmark = pytest.mark.django_db(transaction=True)


def pool_form(begin, end, **overrides) -> dict:
    data = {
        "name": "Admin pool",
        "description": "",
        "begin_at_0": begin.strftime("%Y-%m-%d"),
        "begin_at_1": begin.strftime("%H:%M:%S"),
        "end_at_0": end.strftime("%Y-%m-%d"),
        "end_at_1": end.strftime("%H:%M:%S"),
        "draws_per_user": "2",
        "no_prize_weight": "5",
        "strategy": "redis_lock",
        "prizes-TOTAL_FORMS": "1",
        "prizes-INITIAL_FORMS": "0",
        "prizes-MIN_NUM_FORMS": "0",
        "prizes-MAX_NUM_FORMS": "1000",
        "prizes-0-name": "Kite",
        "prizes-0-description": "",
        "prizes-0-value": "4.00",
        "prizes-0-initial_stock": "7",
    }
    return data | overrides


def test_add_a_pool_with_a_prize(admin_client_):
    begin = timezone.now()
    response = admin_client_.post("/admin/lottery/pool/add/", pool_form(begin, begin + timedelta(days=1)))
    assert response.status_code == 302, response.content.decode()[-3000:]
    pool = Pool.objects.get(name="Admin pool")
    prize = pool.prizes.select_related("stock").get()
    assert (pool.strategy, pool.draws_per_user, pool.no_prize_weight) == ("redis_lock", 2, 5)
    assert (prize.name, prize.stock.quantity, prize.stock.initial_quantity, prize.stock.group_id) == (
        "Kite",
        7,
        7,
        pool.group_id,
    )


def test_add_a_bucketed_pool_whose_prizes_are_spread_over_its_buckets(admin_client_):
    begin = timezone.now()
    response = admin_client_.post("/admin/lottery/pool/add/", pool_form(begin, begin + timedelta(days=1), buckets="4"))
    assert response.status_code == 302, response.content.decode()[-3000:]
    pool = Pool.objects.get(name="Admin pool")
    prize = pool.prizes.get()
    rows = Stock.objects.filter(head_id=prize.stock_id).order_by("bucket")
    assert (pool.buckets, list(rows.values_list("bucket", "quantity"))) == (4, [(0, 2), (1, 2), (2, 2), (3, 1)])
    page = admin_client_.get(f"/admin/lottery/pool/{pool.pk}/change/").content.decode()
    assert 'name="buckets" value="4"' in page and "Kite: awarded 0 of 7 supplied, 7 left" in page


def test_a_pools_buckets_changed_on_its_page_spread_each_prize_again(admin_client_):
    begin = timezone.now()
    admin_client_.post("/admin/lottery/pool/add/", pool_form(begin, begin + timedelta(days=1), buckets="4"))
    pool = Pool.objects.get(name="Admin pool")
    rows = Stock.objects.filter(head_id=pool.prizes.get().stock_id).order_by("bucket")
    change = pool_form(begin, begin + timedelta(days=1), buckets="2", **{"prizes-TOTAL_FORMS": "0"})
    response = admin_client_.post(f"/admin/lottery/pool/{pool.pk}/change/", change)
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert Pool.objects.get(pk=pool.pk).buckets == 2
    assert list(rows.values_list("bucket", "quantity", "initial_quantity")) == [
        (0, 4, 4),
        (1, 3, 3),
        (2, 0, 0),
        (3, 0, 0),
    ]
    # A draw holding a row: the page's transaction cannot wait or try again; nothing changes.
    with stock_rows_held(rows.first().pk):
        busy = pool_form(begin, begin + timedelta(days=1), buckets="3", **{"prizes-TOTAL_FORMS": "0"})
        response = admin_client_.post(f"/admin/lottery/pool/{pool.pk}/change/", busy, follow=True)
        assert "try the change again" in response.content.decode()
        assert Pool.objects.get(pk=pool.pk).buckets == 2
    # Left blank, the count stays as it is.
    blank = pool_form(begin, begin + timedelta(days=1), buckets="", **{"prizes-TOTAL_FORMS": "0"})
    assert admin_client_.post(f"/admin/lottery/pool/{pool.pk}/change/", blank).status_code == 302
    assert Pool.objects.get(pk=pool.pk).buckets == 2


def test_a_pool_that_ends_before_it_begins_is_refused_with_a_message(admin_client_):
    begin = timezone.now()
    response = admin_client_.post("/admin/lottery/pool/add/", pool_form(begin, begin - timedelta(days=1)))
    assert response.status_code == 200
    assert "The end must be after the begin." in response.content.decode()
    assert not Pool.objects.exists()


def test_a_new_prize_needs_its_stock(admin_client_):
    begin = timezone.now()
    data = pool_form(begin, begin + timedelta(days=1), **{"prizes-0-initial_stock": ""})
    response = admin_client_.post("/admin/lottery/pool/add/", data)
    assert response.status_code == 200
    assert "A new prize needs its stock." in response.content.decode()
    assert not Pool.objects.exists()


def test_the_pool_page_shows_the_audit_and_the_stock_read_only(admin_client_, make_pool):
    pool = make_pool()
    page = admin_client_.get(f"/admin/lottery/pool/{pool.pk}/change/").content.decode()
    assert "users over the limit 0" in page
    assert "Gold: awarded 0 of 1 supplied" in page
    assert "<strong>OK</strong>" in page
    assert 'name="prizes-0-quantity"' not in page


def test_restock_a_prize_through_the_service(admin_client_, make_pool):
    pool = make_pool()
    gold = pool.prizes.all()[0]
    response = admin_client_.post(
        f"/admin/lottery/pool/prize/{gold.pk}/restock/", {"quantity": "3", "once": fresh_once()}
    )
    assert response.status_code == 302
    stock = Stock.objects.get(pk=gold.stock_id)
    assert (stock.quantity, stock.initial_quantity) == (4, 4)
    for bad in ("0", "-2", "x"):
        response = admin_client_.post(
            f"/admin/lottery/pool/prize/{gold.pk}/restock/", {"quantity": bad, "once": fresh_once()}
        )
        assert response.status_code == 200
    assert Stock.objects.get(pk=gold.stock_id).quantity == 4


def test_a_pool_whose_window_is_turned_around_is_refused_with_a_message(admin_client_, make_pool):
    pool = make_pool()
    begin = timezone.now()
    data = pool_form(begin, begin - timedelta(days=1), **{"prizes-TOTAL_FORMS": "0"})
    response = admin_client_.post(f"/admin/lottery/pool/{pool.pk}/change/", data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"end_at": ["The end must be after the begin."]}
    assert "pool_window_ordered" not in response.content.decode()
    assert Pool.objects.get(pk=pool.pk).name == "Test pool"


def test_the_prize_restock_page_leads_back_through_its_breadcrumbs(admin_client_, make_pool):
    pool = make_pool()
    gold = pool.prizes.all()[0]
    page = admin_client_.get(f"/admin/lottery/pool/prize/{gold.pk}/restock/").content.decode()
    crumbs = page[page.index('<div class="breadcrumbs">') :]
    crumbs = crumbs[: crumbs.index("</div>")]
    assert 'href="/admin/lottery/"' in crumbs
    assert 'href="/admin/lottery/pool/"' in crumbs
    assert f'href="/admin/lottery/pool/{pool.pk}/change/">Test pool</a>' in crumbs
    assert "Restock" in crumbs


@pytest.mark.parametrize(
    ("field", "overrides"),
    [
        ("begin_at", {"begin_at_0": "0001-01-01", "begin_at_1": "00:00:00"}),
        ("draws_per_user", {"draws_per_user": "1000001"}),
        ("no_prize_weight", {"no_prize_weight": "2147483647"}),
    ],
)
def test_what_the_services_refuse_is_a_form_error_not_a_500(admin_client_, field, overrides):
    # Raised in save_model (InvalidInput), after the form was valid, these answered 500.
    begin = timezone.now()
    response = admin_client_.post("/admin/lottery/pool/add/", pool_form(begin, begin + timedelta(days=1), **overrides))
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == [field]
    assert not Pool.objects.exists()


def test_a_redis_lua_pools_split_that_finds_a_row_held_keeps_the_draws_it_persisted(
    admin_client_, make_user, reservations_redis, monkeypatch
):
    """A split of a ``redis_lua`` pool persists the draws waiting in its streams and lets
    their entries go before it moves the rows; a row held by a draw (taken here just after the
    persisting, which locks the rows too) then fails the move. The page's save runs outside a
    transaction of its own, so the draws persisted stay written: inside one, they rolled back
    with the move, their entries gone, and buyers told their draw was taken had no record."""
    begin = timezone.now() - timedelta(minutes=1)
    form = pool_form(begin, begin + timedelta(days=1), strategy="redis_lua", buckets="2", no_prize_weight="0")
    assert admin_client_.post("/admin/lottery/pool/add/", form).status_code == 302
    pool = Pool.objects.get(name="Admin pool")
    for _ in range(3):
        pool_draw(user=make_user(), pool=pool_get(pool_id=pool.pk))
    assert Draw.objects.filter(pool=pool).count() == 0  # reserved, waiting in the streams
    row = Stock.objects.filter(head_id=pool.prizes.get().stock_id).order_by("bucket").first().pk
    with ExitStack() as held:
        persist = item_states.states_persist

        def persist_then_hold(*args, **kwargs):
            done = persist(*args, **kwargs)
            held.enter_context(stock_rows_held(row))
            return done

        monkeypatch.setattr(item_states, "states_persist", persist_then_hold)
        busy = pool_form(begin, begin + timedelta(days=1), buckets="3", strategy="redis_lua", no_prize_weight="0")
        response = admin_client_.post(
            f"/admin/lottery/pool/{pool.pk}/change/", busy | {"prizes-TOTAL_FORMS": "0"}, follow=True
        )
        assert "try the change again" in response.content.decode()
    assert Draw.objects.filter(pool=pool).count() == 3
    assert Pool.objects.get(pk=pool.pk).buckets == 2
    audit = pool_audit(pool_id=pool.pk)
    assert (audit.awarded, audit.stock, audit.ok) == (3, 4, True), audit
