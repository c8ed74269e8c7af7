from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from accounts.models import ApiToken
from lottery.models import Draw, Pool
from lottery.selectors import pool_audit
from orders.models import Order, Voucher
from orders.selectors import voucher_audit
from payments.models import Payment
from payments.selectors import payments_audit

pytestmark = pytest.mark.django_db(transaction=True)

SIZES = {"users": 50, "vouchers": 4, "orders": 200, "pools": 3, "draws": 150}


def test_seed_big_builds_a_site_with_records_in_every_status_on_which_every_audit_passes(reservations_redis, capsys):
    call_command("seed_big", *(f"--{name}={n}" for name, n in SIZES.items()))

    users = get_user_model().objects.filter(username__startswith="site-")
    assert users.count() == 50
    assert ApiToken.objects.filter(user__in=users).values("user").distinct().count() == 50
    assert Voucher.objects.count() == 4 and Pool.objects.count() == 3
    assert set(Order.objects.values_list("status", flat=True)) == {"confirmed", "held", "paid", "cancelled", "expired"}
    assert set(Draw.objects.values_list("status", flat=True)) == {"confirmed", "held", "claimed", "forfeited"}
    assert Draw.objects.filter(prize__isnull=True).exists()
    assert set(Payment.objects.values_list("status", flat=True)) >= {"paid", "refunded"}
    assert Voucher.objects.filter(strategy="redis_lua").exists() and Pool.objects.filter(strategy="redis_lua").exists()

    for voucher_id in Voucher.objects.values_list("id", flat=True):
        assert voucher_audit(voucher_id=voucher_id).ok, voucher_audit(voucher_id=voucher_id)
        paid = payments_audit(voucher_id=voucher_id)
        assert not paid.used or paid.ok, paid
    for pool_id in Pool.objects.values_list("id", flat=True):
        assert pool_audit(pool_id=pool_id).ok, pool_audit(pool_id=pool_id)
    assert payments_audit().used and payments_audit().ok
    # The command as staff run it, Redis compared with the database for the redis_lua items.
    call_command("audit")
    assert "0 broken" in capsys.readouterr().out


def test_seed_big_refuses_a_database_that_has_a_big_site_already(reservations_redis):
    call_command("seed_big", *(f"--{name}={n}" for name, n in SIZES.items()))
    with pytest.raises(CommandError, match="has a big site already"):
        call_command("seed_big", *(f"--{name}={n}" for name, n in SIZES.items()))


def test_seed_big_refuses_more_orders_per_voucher_than_users():
    with pytest.raises(CommandError, match="More orders per voucher than users"):
        call_command("seed_big", "--users=10", "--vouchers=4", "--orders=100", "--pools=3", "--draws=10")
    assert not Order.objects.exists()
