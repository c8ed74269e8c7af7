from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from inventory.models import Stock, Strategy
from lottery.models import Pool
from lottery.services import pool_draw, pool_update, prize_update
from orders.models import Order, Voucher
from orders.selectors import voucher_audit, vouchers_stocked
from orders.services import order_purchase, voucher_create, voucher_update
from tests.stock import stock_left, stock_row

pytestmark = pytest.mark.django_db


def test_seed_demo_makes_a_live_a_held_an_upcoming_and_a_sold_out_voucher_once(capsys):
    call_command("seed_demo")
    call_command("seed_demo")
    states = sorted((v.window_state(), v.stock_left > 0) for v in vouchers_stocked())
    assert states == [("live", False), ("live", True), ("live", True), ("upcoming", True)]
    assert demo_voucher("Coffee for 1 cent").hold_seconds == 0
    assert demo_voucher("Bakery box, pay within ten minutes").hold_seconds == 600
    drop = demo_voucher("Midnight sneaker drop")
    assert (drop.admission, drop.admission_rate, drop.admission_ticket_seconds) == ("queue", 2.0, 120)
    pool, claimed = Pool.objects.get(name="Lucky wheel"), Pool.objects.get(name="Prize wheel, claim within two minutes")
    assert pool.window_state() == claimed.window_state() == "live"
    assert sorted(p.stock.quantity for p in pool.prizes.select_related("stock")) == [1, 5, 20, 60]
    assert (pool.hold_seconds, pool.no_prize_weight) == (0, 100)
    assert (claimed.hold_seconds, claimed.no_prize_weight, claimed.draws_per_user) == (120, 0, 3)
    User = get_user_model()
    assert User.objects.get(username="staff").is_staff
    assert User.objects.get(username="buyer").check_password("buyer-pass-2026")
    assert "buyer-pass-2026" in capsys.readouterr().out


def demo_voucher(title: str) -> Voucher:
    return Voucher.objects.get(title=title)


def test_seed_demo_starts_the_upcoming_voucher_a_few_minutes_after_each_run():
    call_command("seed_demo", "--quiet")
    Voucher.objects.update(begin_at=timezone.now() - timedelta(days=3))  # a run days ago: it went live since
    Pool.objects.update(begin_at=timezone.now() - timedelta(days=9), end_at=timezone.now() - timedelta(days=2))
    before = timezone.now()
    call_command("seed_demo", "--quiet")
    upcoming = demo_voucher("Midnight sneaker drop")
    assert upcoming.window_state() == "upcoming"
    assert timedelta(minutes=1) <= upcoming.begin_at - before <= timedelta(minutes=10)
    assert demo_voucher("Coffee for 1 cent").window_state() == "live"
    assert {pool.window_state() for pool in Pool.objects.all()} == {"live"}  # had ended


def test_seed_demo_describes_no_fact_that_changes_and_the_pages_show_them_live():
    # "50 units ... taken under db_atomic" and "5 × Headphones" were false after the first
    # restock or switch, beside the page's own "Strategy: none" and "Left 59 of 60".
    call_command("seed_demo", "--quiet")
    strategies = Strategy.values
    for description in [
        *Voucher.objects.values_list("description", flat=True),
        *Pool.objects.values_list("description", flat=True),
    ]:
        assert description
        assert not re.search(r"[0-9]", description), description
        assert not any(name in description for name in strategies), description
        assert "minutes" not in description  # "Starts in ten minutes." was false ten minutes later
    coffee = demo_voucher("Coffee for 1 cent")
    voucher_update(voucher=coffee, strategy="none", restock=10)
    pool = Pool.objects.get(name="Lucky wheel")
    headphones = pool.prizes.get(name="Headphones")
    prize_update(prize=headphones, restock=3)
    pool_update(pool=pool, strategy="redis_lock")
    page = Client().get(f"/vouchers/{coffee.pk}/").content.decode()
    assert 'data-strategy="none"' in page and "db_atomic" not in page
    assert '<strong data-testid="stock">60</strong> of 60' in page
    page = Client().get(f"/pools/{pool.pk}/").content.decode()
    assert f'data-testid="prize-stock-{headphones.pk}">8 of 8 left' in page
    assert 'data-strategy="redis_lock"' in page and "db_atomic" not in page
    assert "5 × Headphones" not in page


def test_seed_demo_sells_the_sold_out_voucher_to_demo_buyers_so_its_audit_adds_up():
    call_command("seed_demo", "--quiet")
    concert = demo_voucher("Concert tickets at cost")
    orders = Order.objects.filter(voucher=concert)
    audit = voucher_audit(voucher_id=concert.pk)
    assert (audit.supplied, audit.orders, audit.stock, audit.buyers) == (5, 5, 0, 5)
    assert audit.ok
    assert all(order.user.username.startswith("demo-fan-") for order in orders.select_related("user"))
    # The page says so from the stock, not the description.
    assert '<span class="tag sold">sold out</span>' in Client().get("/").content.decode()
    call_command("seed_demo", "--quiet")
    assert orders.count() == 5  # nothing sold twice
    voucher_update(voucher=concert, restock=2)  # staff restocked it: the next run sells that too
    call_command("seed_demo", "--quiet")
    audit = voucher_audit(voucher_id=concert.pk)
    assert (audit.supplied, audit.orders, audit.stock) == (7, 7, 0)
    assert audit.ok


def test_seed_demo_really_sells_out_an_empty_voucher_an_older_seed_left():
    begin = timezone.now() - timedelta(hours=1)
    voucher_create(
        title="Concert tickets at cost", stock=0, begin_at=begin, end_at=begin + timedelta(days=7), strategy="db_atomic"
    )
    call_command("seed_demo", "--quiet")
    audit = voucher_audit(voucher_id=demo_voucher("Concert tickets at cost").pk)
    assert (audit.supplied, audit.orders, audit.stock) == (5, 5, 0)


def test_seed_demo_reruns_create_nothing_twice_and_keep_what_was_bought():
    call_command("seed_demo", "--quiet")
    coffee = demo_voucher("Coffee for 1 cent")
    order_purchase(user=get_user_model().objects.get(username="buyer"), voucher=coffee)

    def counts() -> tuple[int, ...]:
        models = (Voucher, Pool, get_user_model(), Order, Stock)
        return tuple(model.objects.count() for model in models)

    before = counts()
    call_command("seed_demo", "--quiet")
    assert counts() == before
    assert stock_left(demo_voucher("Coffee for 1 cent")) == 49


def test_issue_tokens_writes_working_tokens_for_2000_users(tmp_path, make_voucher, capsys):
    out = tmp_path / "tokens.txt"
    call_command("issue_tokens", "--count", "2000", "--out", str(out))
    lines = out.read_text().splitlines()
    assert len(lines) == 2000
    usernames = {line.split()[0] for line in lines}
    assert get_user_model().objects.filter(username__in=usernames).count() == 2000
    voucher = make_voucher()
    username, token = lines[-1].split()
    response = Client().post(f"/api/vouchers/{voucher.pk}/purchase", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201
    print(capsys.readouterr().out)


def test_issue_tokens_refuses_a_bad_count(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("issue_tokens", "--count", "0", "--out", str(tmp_path / "t.txt"))
    assert not (tmp_path / "t.txt").exists()


def test_audit_exits_zero_when_every_invariant_holds(make_voucher, capsys):
    make_voucher(stock=3)
    call_command("audit")
    assert "0 broken" in capsys.readouterr().out


def test_audit_exits_non_zero_when_stock_and_orders_do_not_add_up(make_voucher, capsys):
    voucher = make_voucher(stock=3)
    Stock.objects.filter(pk=stock_row(voucher)).update(quantity=2)  # a lost unit, as a naive write would leave
    with pytest.raises(SystemExit) as exit_info:
        call_command("audit", "--json")
    assert exit_info.value.code == 1
    assert '"conserved": false' in capsys.readouterr().out


def test_audit_covers_pools_and_exits_non_zero_when_a_prize_is_over_awarded(make_pool, make_user, capsys):
    pool = make_pool(prizes=(("Gold", 2),))
    pool_draw(user=make_user(), pool=pool)
    call_command("audit", "--pool", str(pool.pk))
    assert "1 pools, 0 broken" in capsys.readouterr().out
    gold = pool.prizes.get()
    Stock.objects.filter(pk=gold.stock_id).update(quantity=2)  # the award's unit came back: a lost update
    with pytest.raises(SystemExit) as exit_info:
        call_command("audit", "--json")
    assert exit_info.value.code == 1
    out = capsys.readouterr().out
    assert '"pools"' in out and '"conserved": false' in out


def test_audit_refuses_an_unknown_pool(capsys):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No pool with id 424242"):
        call_command("audit", "--pool", "424242")


@pytest.mark.django_db(transaction=True)
def test_audit_compares_a_redis_lua_vouchers_redis_state_with_the_database(make_voucher, reservations_redis, capsys):
    """Invariant 5: Redis stock + orders == supply, the Redis buyers the buyers."""
    from inventory.redis_lua.client import Reservations

    voucher = make_voucher(stock=3, strategy="redis_lua")
    call_command("audit", "--voucher", str(voucher.pk))
    assert "agrees" in capsys.readouterr().out
    Reservations(reservations_redis).add_units(group_id=voucher.group_id, stock_id=stock_row(voucher), units=1)
    with pytest.raises(SystemExit) as exit_info:
        call_command("audit", "--voucher", str(voucher.pk), "--json")
    assert exit_info.value.code == 1
    out = capsys.readouterr().out
    assert '"redis"' in out and '"drifted": true' in out
