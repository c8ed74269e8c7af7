from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from inventory.models import Stock
from lottery.models import Pool
from lottery.services import pool_draw
from orders.models import Voucher

pytestmark = pytest.mark.django_db


def test_seed_demo_makes_a_live_an_upcoming_and_a_sold_out_voucher_once(capsys):
    call_command("seed_demo")
    call_command("seed_demo")
    states = sorted((v.window_state(), v.stock.quantity > 0) for v in Voucher.objects.select_related("stock"))
    assert states == [("live", False), ("live", True), ("upcoming", True)]
    [pool] = Pool.objects.all()
    assert pool.window_state() == "live"
    assert sorted(p.stock.quantity for p in pool.prizes.select_related("stock")) == [1, 5, 20, 60]
    User = get_user_model()
    assert User.objects.get(username="staff").is_staff
    assert User.objects.get(username="buyer").check_password("buyer-pass-2026")
    assert "buyer-pass-2026" in capsys.readouterr().out


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
    Stock.objects.filter(pk=voucher.stock_id).update(quantity=2)  # a lost unit, as a naive write would leave
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
