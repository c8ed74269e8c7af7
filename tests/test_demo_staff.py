"""The demo's logins: ``staff`` is a member of staff with the shop's permissions, not a
superuser, and ``seed_demo --no-logins`` (what docker-compose runs) creates neither of the
logins whose passwords the README prints."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from config.management.commands.seed_demo import DEMO_POOLS, DEMO_STAFF, DEMO_STAFF_PERMISSIONS, DEMO_VOUCHERS
from lottery.models import Pool
from orders.models import Voucher
from tests.restock import fresh_once
from tests.stock import stock_left

pytestmark = pytest.mark.django_db

SHOP = [
    f"{app}.{action}_{model}"
    for app, model in [
        ("orders", "voucher"),
        ("orders", "order"),
        ("lottery", "pool"),
        ("lottery", "prize"),
        ("lottery", "draw"),
    ]
    for action in ("view", "add", "change")
]
LAB = ["lab.view_labrun", "lab.add_labrun", "lab.change_labrun"]


def held(user) -> set[str]:
    return {f"{p.content_type.app_label}.{p.codename}" for p in user.user_permissions.select_related("content_type")}


def staff_client() -> Client:
    """The demo staff, logged in through the admin's own login form with the README's password."""
    client = Client()
    username, password = DEMO_STAFF
    response = client.post("/admin/login/?next=/admin/", {"username": username, "password": password})
    assert response.status_code == 302, response.content
    return client


def test_the_demo_staff_is_staff_with_the_shops_permissions_not_a_superuser():
    call_command("seed_demo", "--quiet")
    staff = get_user_model().objects.get(username=DEMO_STAFF[0])
    assert staff.is_staff and not staff.is_superuser
    assert held(staff) == set(SHOP + LAB) == set(DEMO_STAFF_PERMISSIONS)
    assert not staff.groups.exists()
    assert not any(staff.has_perm(f"auth.{action}_user") for action in ("view", "add", "change", "delete"))


def test_the_demo_staff_uses_the_voucher_and_pool_admin(make_voucher):
    call_command("seed_demo", "--quiet")
    client = staff_client()
    voucher = Voucher.objects.filter(title="Coffee for 1 cent").get()
    pool = Pool.objects.get(name="Lucky wheel")
    for path in (
        "/admin/",
        "/admin/orders/voucher/",
        "/admin/orders/voucher/add/",
        f"/admin/orders/voucher/{voucher.pk}/change/",
        f"/admin/orders/voucher/{voucher.pk}/restock/",
        "/admin/orders/order/",
        "/admin/lottery/pool/",
        "/admin/lottery/pool/add/",
        f"/admin/lottery/pool/{pool.pk}/change/",
        "/admin/lottery/draw/",
        "/lab/",
    ):
        response = client.get(path)
        assert response.status_code == 200, path
    before = stock_left(voucher)
    response = client.post(f"/admin/orders/voucher/{voucher.pk}/restock/", {"quantity": "3", "once": fresh_once()})
    assert response.status_code == 302
    assert stock_left(voucher) == before + 3


def test_the_demo_staff_cannot_open_the_users_admin():
    call_command("seed_demo", "--quiet")
    client = staff_client()
    for path in ("/admin/auth/user/", "/admin/auth/user/add/", "/admin/auth/group/", "/admin/accounts/apitoken/"):
        assert client.get(path).status_code == 403, path
    staff = get_user_model().objects.get(username=DEMO_STAFF[0])
    assert client.get(f"/admin/auth/user/{staff.pk}/change/").status_code == 403
    index = client.get("/admin/").content.decode()
    assert "/admin/auth/user/" not in index


def test_a_rerun_takes_the_superuser_flag_from_an_older_seeds_staff():
    """An older seed made ``staff`` a superuser: the next run makes it what it is now."""
    call_command("seed_demo", "--quiet")
    staff = get_user_model().objects.get(username=DEMO_STAFF[0])
    staff.is_superuser = True
    staff.save()
    staff.user_permissions.clear()
    call_command("seed_demo", "--quiet")
    staff.refresh_from_db()
    assert staff.is_staff and not staff.is_superuser
    assert held(staff) == set(DEMO_STAFF_PERMISSIONS)


def test_seed_demo_without_logins_seeds_the_sales_and_no_known_password(capsys):
    call_command("seed_demo", "--no-logins")
    User = get_user_model()
    assert not User.objects.filter(username__in=["buyer", "staff"]).exists()
    assert not User.objects.filter(is_staff=True).exists()
    assert Voucher.objects.count() == len(DEMO_VOUCHERS) == 4 and Pool.objects.count() == len(DEMO_POOLS) == 2
    # The sold-out voucher's buyers cannot log in at all.
    assert not any(user.has_usable_password() for user in User.objects.all())
    out = capsys.readouterr().out
    assert "pass" not in out
    assert "createsuperuser" in out
