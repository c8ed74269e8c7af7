"""Every case ``benchmarks.history`` measures on a site: the public pages and the fragments they
poll, the pages' buttons, the API, the staff's pages and API, the beat tasks with nothing to do
and with work, and the commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .history_measure import Case
from .history_site import RESEND_WORK, WORK, Site


def all_cases(site: Site) -> list[Case]:
    return [*_pages(site), *_buttons(site), *_api(site), *_staff(site), *_beat(site), *_commands(site)]


def _pages(site: Site) -> list[Case]:
    v, p = site.voucher.pk, site.pool.pk
    anonymous = site.browser()
    buyer = site.browser(site.busy)
    cases = [
        Case(f"GET {path}", "page", lambda _, path=path: anonymous.get(path))
        for path in [
            "/", "/vouchers/stock", f"/vouchers/{v}/", f"/vouchers/{v}/live", "/pools/", "/pools/rows",
            f"/pools/{p}/", f"/pools/{p}/odds", f"/pools/{p}/standing", "/proof/", "/healthz", "/metrics",
        ]
    ]  # fmt: skip
    cases += [
        Case(f"GET {path} (busiest buyer)", "page", lambda _, path=path: buyer.get(path))
        for path in [
            "/", f"/vouchers/{v}/", f"/vouchers/{v}/live", f"/pools/{p}/", f"/pools/{p}/odds",
            f"/pools/{p}/standing", "/orders/", "/draws/", f"/orders/{site.order.pk}/status",
            f"/draws/{site.draw.pk}/status",
        ]
    ]  # fmt: skip
    return cases


def _buttons(site: Site) -> list[Case]:
    v, lua_v, p, lua_p = site.voucher.pk, site.lua_voucher.pk, site.pool.pk, site.lua_pool.pk

    def new_browser():
        return site.browser(site.new_user())

    def held_order():
        user, order = site.held_order()
        return site.browser(user), order.pk

    def held_draw():
        user, draw = site.held_draw()
        return site.browser(user), draw.pk

    takes = [
        (f"/vouchers/{v}/buy", "db_atomic"), (f"/vouchers/{lua_v}/buy", "redis_lua"),
        (f"/pools/{p}/draw", "db_atomic"), (f"/pools/{lua_p}/draw", "redis_lua"),
    ]  # fmt: skip
    return [
        *(Case(f"POST {path} ({strategy})", "page", lambda c, path=path: c.post(path), new_browser)
          for path, strategy in takes),  # fmt: skip
        Case("POST /orders/<id>/pay", "page", lambda g: g[0].post(f"/orders/{g[1]}/pay"), held_order),
        Case("POST /orders/<id>/cancel", "page", lambda g: g[0].post(f"/orders/{g[1]}/cancel"), held_order),
        Case("POST /draws/<id>/claim", "page", lambda g: g[0].post(f"/draws/{g[1]}/claim"), held_draw),
    ]  # fmt: skip


def _api(site: Site) -> list[Case]:
    from accounts.tokens import Claims, revocations

    v, lua_v, p, lua_p = site.voucher.pk, site.lua_voucher.pk, site.pool.pk, site.lua_pool.pk
    anonymous = site.browser()
    busy = site.bearer(site.busy)

    def new_bearer():
        return site.bearer(site.new_user())

    def held_order():
        user, order = site.held_order()
        return site.bearer(user), order.pk

    def held_draw():
        user, draw = site.held_draw()
        return site.bearer(user), draw.pk

    def revocations_read() -> None:
        # Read now if due, so that the run reads nothing: any claims will do.
        revocations.revoked(Claims(user_id=0, expires_at=0, stamp=0, key_hash=""))

    def revocations_due() -> None:
        revocations.read_soon()

    cases = [
        Case(f"GET {path}", "api", lambda _, path=path: anonymous.get(path))
        for path in ["/api/ping", "/api/vouchers", f"/api/vouchers/{v}", "/api/pools", f"/api/pools/{p}"]
    ]
    cases += [
        Case(f"GET {path} (busiest buyer)", "api", lambda _, path=path: busy.get(path), revocations_read)
        for path in [
            "/api/orders", f"/api/orders/{site.order.pk}", "/api/draws", f"/api/draws/{site.draw.pk}",
            "/api/auth/tokens",
            # A page as long on both sites (the small site's busiest buyer has two orders, the
            # big one's 121: a page of 50 costs what it shows, not what the history holds).
            "/api/orders?limit=2",
        ]
    ]  # fmt: skip
    cases += [
        Case("GET /api/auth/tokens, the token check reading the revocations", "api",
             lambda _: busy.get("/api/auth/tokens"), revocations_due),
        Case(f"POST /api/vouchers/{v}/purchase (db_atomic)", "api",
             lambda c: c.post(f"/api/vouchers/{v}/purchase"), new_bearer),
        Case(f"POST /api/vouchers/{lua_v}/purchase (redis_lua)", "api",
             lambda c: c.post(f"/api/vouchers/{lua_v}/purchase"), new_bearer),
        Case(f"POST /api/pools/{p}/draw (db_atomic)", "api", lambda c: c.post(f"/api/pools/{p}/draw"), new_bearer),
        Case(f"POST /api/pools/{lua_p}/draw (redis_lua)", "api",
             lambda c: c.post(f"/api/pools/{lua_p}/draw"), new_bearer),
        Case("POST /api/orders/<id>/pay", "api", lambda g: g[0].post(f"/api/orders/{g[1]}/pay"), held_order),
        Case("POST /api/orders/<id>/cancel", "api", lambda g: g[0].post(f"/api/orders/{g[1]}/cancel"), held_order),
        Case("POST /api/draws/<id>/claim", "api", lambda g: g[0].post(f"/api/draws/{g[1]}/claim"), held_draw),
    ]  # fmt: skip
    return cases


def _staff(site: Site) -> list[Case]:
    from django.contrib import admin
    from django.urls import reverse

    staff = site.browser(site.staff)
    staff_api = site.bearer(site.staff)
    lists = [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in sorted(admin.site._registry, key=lambda model: model._meta.label)
    ]
    cases = [Case(f"GET {path}", "admin-list", lambda _, path=path: staff.get(path)) for path in lists]
    cases += [
        Case(f"GET {path}", "admin", lambda _, path=path: staff.get(path))
        for path in [
            "/admin/",
            reverse("admin:orders_voucher_change", args=[site.voucher.pk]),
            reverse("admin:lottery_pool_change", args=[site.pool.pk]),
            reverse("admin:orders_order_change", args=[site.order.pk]),
            reverse("admin:lottery_draw_change", args=[site.draw.pk]),
            "/lab/",
        ]
    ]
    cases += [
        Case(f"GET {path}", "staff-api", lambda _, path=path: staff_api.get(path))
        for path in [f"/api/admin/vouchers/{site.voucher.pk}/audit", f"/api/admin/pools/{site.pool.pk}/audit"]
    ]
    return cases


def _beat(site: Site) -> list[Case]:
    from inventory.tasks import holds_sweep, reservations_reconcile, reservations_sweep
    from payments.tasks import provider_resend

    idle, work = [], []
    for kind in ("voucher", "pool"):
        for task in (reservations_sweep, reservations_reconcile, holds_sweep):
            idle.append(
                Case(f"beat {task.__name__}({kind}), nothing to do", "beat-idle",
                     lambda _, task=task, kind=kind: task.run(kind),
                     site.idle(lambda task=task, kind=kind: task.run(kind)))
            )  # fmt: skip
        work += [
            Case(f"beat reservations_sweep({kind}), {WORK} reservations waiting", "beat-work",
                 lambda _, kind=kind: reservations_sweep.run(kind),
                 lambda kind=kind: site.reservations_waiting(kind), lambda _: site.drain()),
            Case(f"beat reservations_reconcile({kind}), a drift to repair", "beat-work",
                 lambda _, kind=kind: reservations_reconcile.run(kind), lambda kind=kind: site.drift(kind)),
            Case(f"beat holds_sweep({kind}), {WORK} holds due", "beat-work",
                 lambda _, kind=kind: holds_sweep.run(kind), lambda kind=kind: site.holds_due(kind)),
        ]  # fmt: skip
    idle.append(
        Case("beat provider_resend, nothing to do", "beat-idle", lambda _: provider_resend.run(),
             site.idle(provider_resend.run))
    )  # fmt: skip
    work.append(
        Case(f"beat provider_resend, {RESEND_WORK} charges due", "beat-work", lambda _: provider_resend.run(),
             site.charges_due, site.charges_acknowledged)
    )  # fmt: skip
    return idle + work


def _commands(site: Site) -> list[Case]:
    from io import StringIO

    from django.core.management import call_command

    def command(name: str) -> Callable[[Any], int]:
        def run(_) -> int:
            try:
                call_command(name, stdout=StringIO())
            except SystemExit as exit_:
                return int(exit_.code or 0)
            return 0

        return run

    return [
        Case("manage.py audit", "command", command("audit"), site.drain),
        Case("manage.py reconcile", "command", command("reconcile"), site.drain),
    ]
