"""A big site in seconds, to measure what a request or a periodic job costs on a site with a
long history (docs/operations.md, "A big site"): what ``manage.py seed_big`` runs.

Users with an API token each, vouchers with orders in every status and their payments, and
pools with prizes and draws in every status, written with one ``INSERT ... SELECT`` per table
and chunk over a sequence of numbers (MariaDB's sequence engine, ``seq_1_to_N``; a recursive
CTE on SQLite, slower). The items are made through their services; the records are written
as their strategies would have written them, so that every audit passes (``manage.py audit``):
one order holding a unit per buyer and voucher, draws per user within the pool's limit, a
unit returned once per released record, one paid payment per paid order, one refund recorded
on both sides. What the stock keeps of its records is set once they are all written
(:func:`stock_recount_from_records`), and the live ``redis_lua`` items get their Redis state
from the database last, as a switch of strategy builds it.

The windows are set from the build: the last vouchers and pools are live for 30 days, the
others ended one after the other before. Orders held for payment, and prizes held for their
claim, stay held for a day after the build (then the sweep releases them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TextIO

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from harness.big_site import BIG_SITE_BUSIEST_BUYER, BIG_SITE_USERNAME_PREFIX
from inventory.records import MAX_HOLD_SECONDS
from inventory.totals import group_rows
from lottery.models import Draw, Pool, Prize
from lottery.selectors import pool_get
from lottery.services import pool_create, pool_update, prize_create
from orders.models import Order, Voucher
from orders.selectors import voucher_get
from orders.services import voucher_create, voucher_update

from .big_site_totals import stock_recount_from_records
from .sequence_sql import SequenceSql

# Rows per INSERT ... SELECT: one transaction each, and a progress line.
CHUNK = 100_000
PRIZES_PER_POOL = 4
# The live items, newest last: (strategy, hold seconds). The benchmark buys, pays, cancels and
# draws on them; the ones before them ended, under the strategies a site runs its sales with.
LIVE_VOUCHERS = [("db_atomic", 0), ("db_atomic", 600), ("redis_lua", 600)]
LIVE_POOLS = [("db_atomic", 3600), ("redis_lua", 3600)]
PAST_STRATEGIES = ["db_atomic", "db_pessimistic", "db_optimistic", "redis_lock"]
DRAWS_PER_USER = [1, 2, 3, 5, 10]
LIVE_FOR = timedelta(days=30)
# Units left to sell: a live item never sells out under a benchmark; half the past ones did.
LIVE_UNITS, LIVE_PRIZE_UNITS, PAST_UNITS = 1_000_000, 100_000, 50


@dataclass
class Planned:
    """One item to make and what to write for it."""

    strategy: str
    hold_seconds: int
    live: bool
    begin_at: datetime
    end_at: datetime
    records: int
    units_left: int
    item: Voucher | Pool | None = None


class BigSite:
    """Builds the site on the default database, writing its progress to ``out``."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def build(self, *, users: int, vouchers: int, orders: int, pools: int, draws: int) -> None:
        """``CommandError`` for sizes it cannot build, or a database with a big site already."""
        if users < 1 or vouchers < len(LIVE_VOUCHERS) or pools < len(LIVE_POOLS) or orders < 0 or draws < 0:
            raise CommandError(
                f"Give at least 1 user, {len(LIVE_VOUCHERS)} vouchers and {len(LIVE_POOLS)} pools, "
                "and no negative count."
            )
        User = get_user_model()
        if User.objects.filter(username=BIG_SITE_BUSIEST_BUYER).exists():
            raise CommandError("This database has a big site already: build one on an empty database.")
        self.sql = SequenceSql(connection.vendor)
        self.now = timezone.now().replace(microsecond=0)
        self.held_until = self.now + timedelta(seconds=MAX_HOLD_SECONDS)
        self.users = users
        self.base = User.objects.order_by("-id").values_list("id", flat=True).first() or 0
        voucher_plan = self._plan(vouchers, orders, LIVE_VOUCHERS, units=LIVE_UNITS, holds=(0, 600))
        pool_plan = self._plan(pools, draws, LIVE_POOLS, units=LIVE_PRIZE_UNITS, holds=(0, 3600))
        self._check_sizes(voucher_plan, pool_plan)
        self.voucher_plan = voucher_plan
        started = time.perf_counter()
        self._step("items", lambda: self._items(voucher_plan, pool_plan))
        with self.sql.checks_off():
            self._rows("users", users, self._users)
            self._rows("tokens", users, self._tokens)
            for n, plan in enumerate(voucher_plan):
                self._rows(
                    f"orders of voucher {n + 1}", plan.records, lambda a, b, n=n, plan=plan: self._orders(n, plan, a, b)
                )
            self._step("the busiest buyer's orders", lambda: self._busy_orders(voucher_plan, orders))
            self._step("payments", lambda: self._payments([p for p in voucher_plan if p.hold_seconds]))
            for n, plan in enumerate(pool_plan):
                self._rows(
                    f"draws of pool {n + 1}", plan.records, lambda a, b, n=n, plan=plan: self._draws(n, plan, a, b)
                )
        self._step(
            "stock recounted",
            lambda: stock_recount_from_records(
                vouchers=[p.item for p in voucher_plan], pools=[p.item for p in pool_plan]
            ),
        )
        self._step("strategies switched (redis_lua states loaded)", lambda: self._strategies(voucher_plan, pool_plan))
        self.out.write(
            f"Big site built in {time.perf_counter() - started:.0f} s: {users:,} users with a token each, "
            f"{vouchers} vouchers, {Order.objects.count():,} orders, {pools} pools, {Draw.objects.count():,} draws."
        )

    # The plan.

    def _plan(self, count: int, records: int, live: list[tuple[str, int]], *, units: int, holds: tuple[int, int]):
        """``count`` items, the last ``len(live)`` of them live, the others ended one after the
        other (two days each, every other one sold out); ``records`` shared out evenly."""
        plan = []
        past = count - len(live)
        for n in range(count):
            share = records // count + (1 if n < records % count else 0)
            if n >= past:
                strategy, hold = live[n - past]
                begin_at, end_at = self.now - timedelta(days=3), self.now + LIVE_FOR
                left = units
            else:
                strategy, hold = PAST_STRATEGIES[n % len(PAST_STRATEGIES)], holds[n % 4 != 3]
                begin_at = self.now - timedelta(days=2 * (past - n) + 3)
                end_at = begin_at + timedelta(days=2)
                left = 0 if n % 2 == 0 else PAST_UNITS
            plan.append(Planned(strategy, hold, n >= past, begin_at, end_at, share, left))
        return plan

    def _check_sizes(self, vouchers: list[Planned], pools: list[Planned]) -> None:
        if max(p.records for p in vouchers) > self.users:
            raise CommandError("More orders per voucher than users: each user holds at most one order of each.")
        for n, plan in enumerate(pools):
            if -(-plan.records // DRAWS_PER_USER[n % len(DRAWS_PER_USER)]) > self.users:
                raise CommandError(f"Too many draws for pool {n + 1}: its users would pass its draws per user.")

    # The steps.

    def _step(self, what: str, run) -> None:
        started = time.perf_counter()
        run()
        self.out.write(f"  {what}: {time.perf_counter() - started:.1f} s")
        self.out.flush()

    def _rows(self, what: str, count: int, insert) -> None:
        """``insert(first, last)`` for every chunk of 1..count, with a progress line for each."""
        started = time.perf_counter()
        for first in range(1, count + 1, CHUNK):
            last = min(first + CHUNK - 1, count)
            insert(first, last)
            if count > CHUNK:
                self.out.write(f"    {what}: {last:,} of {count:,}")
        seconds = time.perf_counter() - started
        self.out.write(f"  {what}: {count:,} in {seconds:.1f} s ({count / max(seconds, 1e-3):,.0f} rows/s)")
        self.out.flush()

    def _items(self, vouchers: list[Planned], pools: list[Planned]) -> None:
        """Every item through its service, under ``db_atomic`` until its records are written."""
        for n, plan in enumerate(vouchers):
            plan.item = voucher_create(
                title=f"Site voucher {n + 1}",
                stock=plan.units_left,
                begin_at=plan.begin_at,
                end_at=plan.end_at,
                strategy="db_atomic",
                hold_seconds=plan.hold_seconds,
                description="A voucher of the big site (manage.py seed_big).",
            )
        for n, plan in enumerate(pools):
            plan.item = pool_create(
                name=f"Site pool {n + 1}",
                begin_at=plan.begin_at,
                end_at=plan.end_at,
                strategy="db_atomic",
                hold_seconds=plan.hold_seconds,
                draws_per_user=DRAWS_PER_USER[n % len(DRAWS_PER_USER)],
                no_prize_weight=PRIZES_PER_POOL * plan.units_left // 2 or 10,
                description="A pool of the big site (manage.py seed_big).",
            )
            for p in range(PRIZES_PER_POOL):
                prize_create(pool=plan.item, name=f"Prize {p + 1}", stock=plan.units_left, value=10 * (p + 1))

    def _users(self, first: int, last: int) -> None:
        sql = self.sql
        username = sql.concat(f"'{BIG_SITE_USERNAME_PREFIX}'", "seq")
        self.sql.run(
            "INSERT INTO auth_user (id, password, is_superuser, username, first_name, last_name, email, is_staff, "
            f"is_active, date_joined) SELECT %s + seq, '!', 0, {username}, '', '', '', 0, 1, "
            f"{sql.plus('%s', '(seq - %s) * 5000000')} FROM {sql.numbers(first, last)}",
            [self.base, sql.moment(self.now), self.users],
        )

    def _tokens(self, first: int, last: int) -> None:
        sql = self.sql
        expires_at = self.now + timedelta(seconds=settings.API_TOKEN_TTL_SECONDS)
        self.sql.run(
            "INSERT INTO accounts_apitoken (user_id, key_hash, stamp, created_at, expires_at) "
            f"SELECT %s + seq, {sql.key('%s + seq', 64, 'seed-token:')}, 1, %s, %s FROM {sql.numbers(first, last)}",
            [self.base, self.base, sql.moment(self.now), sql.moment(expires_at)],
        )

    def _spread(self, plan: Planned) -> tuple[datetime, int]:
        """When the item's records start, and the microseconds between two of them: spread over
        its window up to now."""
        span = min(plan.end_at, self.now - timedelta(minutes=1)) - plan.begin_at
        return plan.begin_at, max(1, int(span.total_seconds() * 1_000_000) // (plan.records + 1))

    def _orders(self, n: int, plan: Planned, first: int, last: int) -> None:
        """The voucher's orders ``first..last``: each by a user of its own (the users go round
        from where the previous voucher's stopped). Without a payment window, confirmed; with
        one, 70 in 100 paid, 12 expired, 14 cancelled, 4 held (expired, once the sale ended)."""
        sql = self.sql
        hold = plan.hold_seconds
        offset = sum(p.records for p in self.voucher_plan[:n])
        start, step = self._spread(plan)
        if hold:
            still_held = "'held'" if plan.live else "'expired'"
            # Each hundred orders in a mixed order (37 is prime to 100), so that a few orders
            # have every status too.
            bucket = "(seq * 37) %% 100"
            status = (
                f"CASE WHEN {bucket} < 70 THEN 'paid' WHEN {bucket} < 82 THEN 'expired' "
                f"WHEN {bucket} < 96 THEN 'cancelled' ELSE {still_held} END"
            )
        else:
            status = "'confirmed'"
        released = "r.status IN ('cancelled', 'expired')"
        self.sql.run(
            "INSERT INTO orders_order (user_id, voucher_id, stock_id, status, created_at, hold_until, settled_at, "
            "released_at, releases, buyer_guard) "
            "SELECT r.user_id, %s, %s, r.status, r.created_at, "
            f"CASE WHEN %s = 0 THEN NULL WHEN r.status = 'held' THEN %s ELSE {sql.plus('r.created_at', '%s')} END, "
            f"CASE WHEN r.status = 'paid' THEN {sql.plus('r.created_at', '30000000')} END, "
            f"CASE WHEN r.status = 'expired' THEN {sql.plus('r.created_at', '%s')} "
            f"WHEN r.status = 'cancelled' THEN {sql.plus('r.created_at', '60000000')} END, "
            f"CASE WHEN {released} THEN 1 ELSE 0 END, CASE WHEN {released} THEN NULL ELSE r.user_id END "
            f"FROM (SELECT %s + ((%s + seq - 1) %% %s) + 1 AS user_id, {status} AS status, "
            f"{sql.plus('%s', 'seq * %s')} AS created_at FROM {sql.numbers(first, last)}) AS r",
            [
                plan.item.pk,
                group_rows(group_id=plan.item.group_id)[0],
                hold,
                sql.moment(self.held_until),
                hold * 1_000_000,
                hold * 1_000_000,
                self.base,
                offset,
                self.users,
                sql.moment(start),
                step,
            ],
        )

    def _busy_orders(self, vouchers: list[Planned], orders: int) -> None:
        """The busiest buyer (user 1) cancels and buys again, so that one user has many orders:
        121 at the default sizes, as a regular of a real shop may."""
        held = [p for p in vouchers if p.hold_seconds]
        extra = max(1, min(120, orders // 3300))
        user_id = self.base + 1
        rows = []
        for n in range(extra):
            plan = held[n % len(held)]
            at = plan.begin_at + timedelta(minutes=n + 1)
            rows.append(
                Order(
                    user_id=user_id,
                    voucher_id=plan.item.pk,
                    stock_id=group_rows(group_id=plan.item.group_id)[0],
                    status=Order.Status.CANCELLED,
                    hold_until=at + timedelta(seconds=plan.hold_seconds),
                    released_at=at + timedelta(seconds=30),
                    releases=1,
                )
            )
        created = Order.objects.bulk_create(rows)
        # auto_now_add stamped them now: they were made during the sales.
        for order, row in zip(created, rows, strict=True):
            Order.objects.filter(pk=order.pk).update(created_at=row.released_at - timedelta(seconds=30))

    def _payments(self, held: list[Planned]) -> None:
        """A paid payment for every paid order; a refunded one for half the released orders (the
        confirmation came after the hold ended); a payment waiting for its confirmation for a
        quarter of the held orders. The provider's ledger has each charge, acknowledged and
        refunded as its payment was resolved."""
        sql = self.sql
        for plan in held:
            self.sql.run(
                "INSERT INTO payments_payment (order_id, reference, status, open_guard, created_at, settled_at, "
                "refunded_at, refund_reason) "
                f"SELECT o.id, {sql.key('o.id', 32, 'seed-pay:')}, "
                "CASE o.status WHEN 'paid' THEN 'paid' WHEN 'held' THEN 'requested' ELSE 'refunded' END, "
                "CASE WHEN o.status = 'held' THEN o.id END, "
                f"{sql.plus('o.created_at', '10000000')}, o.settled_at, "
                f"CASE WHEN o.status IN ('expired', 'cancelled') THEN {sql.plus('o.released_at', '5000000')} END, "
                "CASE WHEN o.status IN ('expired', 'cancelled') THEN o.status ELSE '' END "
                "FROM orders_order o WHERE o.voucher_id = %s AND (o.status = 'paid' "
                "OR (o.status IN ('expired', 'cancelled') AND o.id %% 2 = 0) OR (o.status = 'held' AND o.id %% 4 = 0))",
                [plan.item.pk],
            )
            # A held order whose payment waits was marked as the pay marks it (``hold_settle_asked``).
            self.sql.run(
                f"UPDATE orders_order SET settle_asked_at = {sql.plus('created_at', '10000000')} "
                "WHERE voucher_id = %s AND status = 'held' AND id %% 4 = 0",
                [plan.item.pk],
            )
            self.sql.run(
                "INSERT INTO payments_providercharge (reference, created_at, sent_at, callbacks, acknowledgements, "
                "acknowledged_at, refunded_at) "
                "SELECT p.reference, p.created_at, p.created_at, 1, "
                "CASE WHEN p.status = 'requested' THEN 0 ELSE 1 END, COALESCE(p.settled_at, p.refunded_at), "
                "p.refunded_at FROM payments_payment p JOIN orders_order o ON o.id = p.order_id "
                "WHERE o.voucher_id = %s",
                [plan.item.pk],
            )

    def _draws(self, n: int, plan: Planned, first: int, last: int) -> None:
        """The pool's draws ``first..last``: users 1, 2, ... each up to the pool's limit. A third
        win nothing (confirmed); the others win the prizes in turn: confirmed without a claim
        window, and with one, 7 in 10 claimed, 2 forfeited, 1 held (forfeited, once it ended)."""
        sql = self.sql
        pool = plan.item
        limit = pool.draws_per_user
        prizes = list(Prize.objects.filter(pool=pool).order_by("id").values_list("id", "stock_id"))
        k = "(seq - 1)"

        def prize(column: int) -> str:  # the prize's id (0) or its stock row (1), in turn
            return (
                "CASE "
                + " ".join(f"WHEN {k} %% {len(prizes)} = {i} THEN {p[column]}" for i, p in enumerate(prizes))
                + " END"
            )

        bucket = f"({sql.div(k, '3')} * 7) %% 10"
        if plan.hold_seconds:
            still_held = "'held'" if plan.live else "'forfeited'"
            won = f"CASE WHEN {bucket} < 7 THEN 'claimed' WHEN {bucket} < 9 THEN 'forfeited' ELSE {still_held} END"
        else:
            won = "'confirmed'"
        start, step = self._spread(plan)
        hold = plan.hold_seconds
        self.sql.run(
            "INSERT INTO lottery_draw (user_id, pool_id, prize_id, stock_id, seq, user_guard, status, created_at, "
            "hold_until, settled_at, released_at, releases) "
            "SELECT r.user_id, %s, r.prize_id, r.stock_id, r.n, r.user_id, r.status, r.created_at, "
            f"CASE WHEN r.prize_id IS NULL OR %s = 0 THEN NULL WHEN r.status = 'held' THEN %s "
            f"ELSE {sql.plus('r.created_at', '%s')} END, "
            f"CASE WHEN r.status = 'claimed' THEN {sql.plus('r.created_at', '60000000')} END, "
            f"CASE WHEN r.status = 'forfeited' THEN {sql.plus('r.created_at', '%s')} END, "
            "CASE WHEN r.status = 'forfeited' THEN 1 ELSE 0 END "
            f"FROM (SELECT %s + ({sql.div(k, '%s')} %% %s) + 1 AS user_id, ({k} %% %s) + 1 AS n, "
            f"CASE WHEN {k} %% 3 = 0 THEN NULL ELSE {prize(0)} END AS prize_id, "
            f"CASE WHEN {k} %% 3 = 0 THEN NULL ELSE {prize(1)} END AS stock_id, "
            f"CASE WHEN {k} %% 3 = 0 THEN 'confirmed' ELSE {won} END AS status, "
            f"{sql.plus('%s', 'seq * %s')} AS created_at FROM {sql.numbers(first, last)}) AS r",
            [
                pool.pk,
                hold,
                sql.moment(self.held_until),
                hold * 1_000_000,
                hold * 1_000_000,
                self.base,
                limit,
                self.users,
                limit,
                sql.moment(start),
                step,
            ],
        )

    def _strategies(self, vouchers: list[Planned], pools: list[Planned]) -> None:
        """Each item to its own strategy, through its service: a ``redis_lua`` one loads its
        state from the records, as a switch on a running site does."""
        for plan in vouchers:
            if plan.strategy != "db_atomic":
                voucher_update(voucher=voucher_get(voucher_id=plan.item.pk), strategy=plan.strategy)
        for plan in pools:
            if plan.strategy != "db_atomic":
                pool_update(pool=pool_get(pool_id=plan.item.pk), strategy=plan.strategy)
