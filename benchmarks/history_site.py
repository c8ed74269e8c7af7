"""The site ``benchmarks.history`` measures: who and what its cases use, and what a case
makes before it runs (a new buyer, a held order, holds due, drift, charges to send again)."""

from __future__ import annotations

import time
from collections.abc import Callable

from harness.big_site import BIG_SITE_BUSIEST_BUYER

# The same work for the beat tasks on both sites.
WORK = 20
RESEND_WORK = 100


class Site:
    """The site being measured: who and what the cases use, and the cases."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from django.utils import timezone

        from lottery.models import Draw, Pool
        from orders.models import Order, Voucher

        User = get_user_model()
        now = timezone.now()
        live = {"end_at__gt": now, "begin_at__lte": now, "listed": True}
        self.busy = User.objects.get(username=BIG_SITE_BUSIEST_BUYER)
        self.voucher = Voucher.objects.filter(strategy="db_atomic", hold_seconds__gt=0, **live).latest("id")
        self.lua_voucher = Voucher.objects.filter(strategy="redis_lua", **live).latest("id")
        self.pool = Pool.objects.filter(strategy="db_atomic", hold_seconds__gt=0, **live).latest("id")
        self.lua_pool = Pool.objects.filter(strategy="redis_lua", **live).latest("id")
        self.order = Order.objects.filter(user=self.busy).latest("id")
        self.draw = Draw.objects.filter(user=self.busy).latest("id")
        self.staff, made = User.objects.get_or_create(username="history-staff", defaults={"is_staff": True})
        if made or not self.staff.is_superuser:
            self.staff.is_superuser = True
            self.staff.set_unusable_password()
            self.staff.save()
        self.run_id = int(time.time())
        self.made = 0

    # Who.

    def new_user(self):
        from django.contrib.auth import get_user_model

        self.made += 1
        user = get_user_model()(username=f"history-{self.run_id}-{self.made}")
        user.set_unusable_password()
        user.save()
        return user

    @staticmethod
    def browser(user=None):
        from django.test import Client

        client = Client()
        if user is not None:
            client.force_login(user)
        return client

    @staticmethod
    def bearer(user):
        from django.test import Client

        from accounts.services import token_issue

        return Client(headers={"Authorization": f"Bearer {token_issue(user=user)}"})

    # What a case needs made first.

    def held_order(self):
        """A new buyer's order of the live voucher held for payment."""
        from orders.services import order_purchase

        user = self.new_user()
        return user, order_purchase(user=user, voucher=self.voucher)

    def held_draw(self):
        """A new user's draw of a prize of the live pool, held for its claim."""
        from lottery.services import pool_draw

        while True:
            user = self.new_user()
            for _ in range(self.pool.draws_per_user):
                draw = pool_draw(user=user, pool=self.pool)
                if draw.prize_id is not None:
                    return user, draw

    def holds_due(self, kind: str) -> list[int]:
        """``WORK`` holds of the kind made by new users, their deadline moved into the past."""
        from datetime import timedelta

        from django.utils import timezone

        from lottery.models import Draw
        from orders.models import Order

        taken = [self.held_order()[1] if kind == "voucher" else self.held_draw()[1] for _ in range(WORK)]
        model = Order if kind == "voucher" else Draw
        ids = [record.pk for record in taken]
        model.objects.filter(pk__in=ids).update(hold_until=timezone.now() - timedelta(seconds=1))
        return ids

    def reservations_waiting(self, kind: str) -> None:
        """``WORK`` reservations of the kind's redis_lua item, not written yet."""
        from lottery.services import pool_draw
        from orders.services import order_purchase

        for _ in range(WORK):
            if kind == "voucher":
                order_purchase(user=self.new_user(), voucher=self.lua_voucher)
            else:
                pool_draw(user=self.new_user(), pool=self.lua_pool)

    def drift(self, kind: str) -> None:
        """The redis_lua item's units in Redis three too many (reconciliation repairs them)."""
        from inventory.redis_lua.client import reservations_client
        from inventory.totals import group_rows
        from lottery.models import Prize

        if kind == "voucher":
            group_id = self.lua_voucher.group_id
            stock_id = group_rows(group_id=group_id)[0]
        else:
            group_id, stock_id = self.lua_pool.group_id, Prize.objects.filter(pool=self.lua_pool).first().stock_id
        reservations_client().add_units(group_id=group_id, stock_id=stock_id, units=3)

    def charges_due(self) -> list[int]:
        """``RESEND_WORK`` acknowledged charges made unacknowledged and due again."""
        from datetime import timedelta

        from django.utils import timezone

        from payments.models import ProviderCharge

        ids = list(
            ProviderCharge.objects.filter(acknowledged_at__isnull=False)
            .order_by("id")
            .values_list("id", flat=True)[:RESEND_WORK]
        )
        ProviderCharge.objects.filter(pk__in=ids).update(
            acknowledged_at=None, sent_at=timezone.now() - timedelta(hours=1)
        )
        return ids

    @staticmethod
    def charges_acknowledged(ids: list[int]) -> None:
        from django.db.models import F

        from payments.models import ProviderCharge

        ProviderCharge.objects.filter(pk__in=ids).update(acknowledged_at=F("sent_at"))

    def drain(self) -> None:
        """Every reservation waiting written, as a worker would."""
        from inventory.tasks import reservations_drain

        for kind, item in (("voucher", self.lua_voucher), ("pool", self.lua_pool)):
            reservations_drain.apply(args=(kind, item.pk, item.group_id))

    def idle(self, task: Callable[[], int]) -> Callable[[], None]:
        """Before a run with nothing to do: whatever was to do, done (untimed)."""

        def setup() -> None:
            self.drain()
            for _ in range(1000):
                if task() == 0:
                    break

        return setup

    def counts(self) -> dict:
        from django.contrib.auth import get_user_model

        from accounts.models import ApiToken
        from lottery.models import Draw, Pool
        from orders.models import Order, Voucher
        from payments.models import Payment

        return {
            "users": get_user_model().objects.count(),
            "tokens": ApiToken.objects.count(),
            "vouchers": Voucher.objects.count(),
            "orders": Order.objects.count(),
            "payments": Payment.objects.count(),
            "pools": Pool.objects.count(),
            "draws": Draw.objects.count(),
            "busiest buyer's orders": Order.objects.filter(user=self.busy).count(),
            "busiest buyer's draws": Draw.objects.filter(user=self.busy).count(),
        }
