"""The staff API asks for the same Django model permissions as the admin site.

Being staff lets a user in; each call then needs its model permission (a superuser holds
every one). A member of staff without it is refused 403 ``forbidden`` before anything is
read or written, even when holding every other staff permission.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from inventory.models import Stock
from lottery.models import Pool, Prize
from orders.models import Voucher

from .conftest import STAFF_PERMISSIONS
from .http import assert_error

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # {voucher}, {pool} and {prize} are the ids of the items made for the test
    body: dict | None
    permission: str
    status: int  # what a caller holding the permission gets


def _window() -> dict:
    begin = timezone.now().replace(microsecond=0)
    return {"begin_at": begin.isoformat(), "end_at": (begin + timedelta(hours=1)).isoformat()}


CREATES_WITH_A_WINDOW = ("/api/admin/vouchers", "/api/admin/pools")


ROUTES = [
    Route("post", "/api/admin/vouchers", {"title": "New", "stock": 10, "strategy": "none"}, "orders.add_voucher", 201),
    Route("patch", "/api/admin/vouchers/{voucher}", {"restock": 50, "strategy": "none"}, "orders.change_voucher", 200),
    Route("get", "/api/admin/vouchers/{voucher}/audit", None, "orders.view_voucher", 200),
    Route(
        "post",
        "/api/admin/pools",
        {"name": "New", "draws_per_user": 9, "no_prize_weight": 0, "strategy": "none"},
        "lottery.add_pool",
        201,
    ),
    Route("patch", "/api/admin/pools/{pool}", {"strategy": "none", "draws_per_user": 99}, "lottery.change_pool", 200),
    Route("post", "/api/admin/pools/{pool}/prizes", {"name": "Car", "stock": 100}, "lottery.add_prize", 201),
    Route("patch", "/api/admin/prizes/{prize}", {"restock": 50, "name": "Gold bar"}, "lottery.change_prize", 200),
    Route("get", "/api/admin/pools/{pool}/audit", None, "lottery.view_pool", 200),
]


@pytest.fixture
def items(make_voucher, make_pool) -> dict:
    voucher = make_voucher(strategy="db_atomic")
    pool = make_pool(strategy="db_atomic")
    return {"voucher": voucher.pk, "pool": pool.pk, "prize": pool.prizes.first().pk}


def call(client: Client, route: Route, items: dict, **ids):
    url = route.path.format(**(items | ids))
    if route.method == "get":
        return client.get(url)
    body = route.body | (_window() if route.path in CREATES_WITH_A_WINDOW else {})
    return getattr(client, route.method)(url, data=json.dumps(body), content_type="application/json")


def everything() -> tuple:
    """What any staff call could change, to compare before and after a refusal."""
    return (
        list(Voucher.objects.order_by("pk").values_list("pk", "title", "strategy", "begin_at", "end_at")),
        list(Pool.objects.order_by("pk").values_list("pk", "name", "strategy", "draws_per_user", "no_prize_weight")),
        list(Prize.objects.order_by("pk").values_list("pk", "name", "value")),
        list(Stock.objects.order_by("pk").values_list("pk", "quantity", "initial_quantity")),
    )


def ids(route: Route) -> str:
    return f"{route.method.upper()} {route.path}"


def test_every_staff_route_of_the_api_is_covered_here():
    paths = Client().get("/api/openapi.json").json()["paths"]
    staff = {
        (method, path)
        for path, operations in paths.items()
        for method, operation in operations.items()
        if "staff" in operation.get("tags", ())
    }
    covered = {(r.method, r.path.replace("{voucher}", "{voucher_id}").replace("{pool}", "{pool_id}")) for r in ROUTES}
    covered = {(m, p.replace("{prize}", "{prize_id}")) for m, p in covered}
    assert staff == covered


@pytest.mark.parametrize("route", ROUTES, ids=ids)
def test_staff_without_the_routes_permission_are_refused_and_nothing_is_written(api_client, items, route):
    # Every other staff permission, and still refused: it is this one that counts.
    others = tuple(p for p in STAFF_PERMISSIONS if p != route.permission)
    if route.permission.split(".")[1].startswith("view_"):
        # The admin lets the change permission stand for view; leave it out too.
        others = tuple(p for p in others if p != route.permission.replace(".view_", ".change_"))
    before = everything()
    for client in (api_client(staff=True, permissions=others), api_client(staff=True, permissions=())):
        assert_error(call(client, route, items), 403, "forbidden")
    assert everything() == before


@pytest.mark.parametrize("route", [r for r in ROUTES if "{" in r.path], ids=ids)
def test_staff_without_the_permission_learn_nothing_of_an_unknown_item(api_client, items, route):
    client = api_client(staff=True, permissions=())
    missing = dict.fromkeys(("voucher", "pool", "prize"), 999_999)
    assert_error(call(client, route, items, **missing), 403, "forbidden")


@pytest.mark.parametrize("route", ROUTES, ids=ids)
def test_staff_with_exactly_the_routes_permission_are_answered(api_client, items, route):
    response = call(api_client(staff=True, permissions=(route.permission,)), route, items)
    assert response.status_code == route.status, response.content


@pytest.mark.parametrize("route", ROUTES, ids=ids)
def test_a_superuser_is_answered_without_any_permission_of_its_own(api_client, make_user, items, route):
    boss = make_user(staff=True, permissions=())
    boss.is_superuser = True
    boss.save(update_fields=["is_superuser"])
    response = call(api_client(boss), route, items)
    assert response.status_code == route.status, response.content


@pytest.mark.parametrize(
    ("path", "view", "change"),
    [
        ("/api/admin/vouchers/{voucher}/audit", "orders.view_voucher", "orders.change_voucher"),
        ("/api/admin/pools/{pool}/audit", "lottery.view_pool", "lottery.change_pool"),
    ],
)
def test_an_audit_is_read_with_the_view_or_the_change_permission_as_in_the_admin(api_client, items, path, view, change):
    route = Route("get", path, None, view, 200)
    for permission in (view, change):
        response = call(api_client(staff=True, permissions=(permission,)), route, items)
        assert response.status_code == 200, response.content


@pytest.mark.parametrize("route", ROUTES, ids=ids)
def test_a_user_holding_the_permission_but_not_staff_is_refused(api_client, items, route):
    # The admin site lets no one in who is not staff, whatever they hold.
    before = everything()
    assert_error(call(api_client(permissions=(route.permission,)), route, items), 403, "forbidden")
    assert everything() == before


def test_the_load_runs_member_of_staff_restocks_a_voucher_and_may_do_nothing_else(items):
    from loadtests.staff import staff_token_create

    staff = Client(headers={"Authorization": f"Bearer {staff_token_create(prefix='load-staff')}"})
    restock = next(r for r in ROUTES if r.path == "/api/admin/vouchers/{voucher}")
    restock = Route(restock.method, restock.path, {"restock": 5}, restock.permission, restock.status)
    assert call(staff, restock, items).status_code == 200
    before = everything()
    for route in ROUTES:
        # The change permission stands for view, as in the admin: it reads the voucher's audit.
        if route.permission not in (restock.permission, "orders.view_voucher"):
            assert_error(call(staff, route, items), 403, "forbidden")
    assert everything() == before


def test_issue_tokens_gives_staff_the_permissions_asked_for(tmp_path, items):
    from django.contrib.auth import get_user_model
    from django.core.management import CommandError, call_command

    out = tmp_path / "staff.txt"
    call_command("issue_tokens", count=1, out=out, prefix="ops", staff=True, permission=["orders.change_voucher"])
    token = out.read_text().split()[1]
    staff = Client(headers={"Authorization": f"Bearer {token}"})
    restock = Route("patch", "/api/admin/vouchers/{voucher}", {"restock": 5}, "orders.change_voucher", 200)
    assert call(staff, restock, items).status_code == 200
    create = next(r for r in ROUTES if r.permission == "orders.add_voucher")
    assert_error(call(staff, create, items), 403, "forbidden")
    with pytest.raises(CommandError, match="no such permission: orders.fly_voucher"):
        call_command("issue_tokens", count=1, out=out, prefix="ops2", staff=True, permission=["orders.fly_voucher"])
    assert not get_user_model().objects.filter(username__startswith="ops2-").exists()
