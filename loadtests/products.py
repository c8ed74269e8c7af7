"""The products a run takes stock from, as a parameter: a voucher (the flash sale) or a
pool of prizes (the prize draw).

Each product knows how to create fresh data for one run, which records take its
stock (orders; draws that won a prize), how to audit it, how to compare its
``redis_lua`` state in Redis with the database, and how to read what the API confirmed
from the outcome files the locustfiles wrote (``loadtests/common.py``). What is the
same for both lives once, in :class:`Product`: both keep their stock in one stock
group, so sampling the stock, waiting until the server has gone quiet or every
reservation is persisted, and counting the confirmations the database does not bear
out are written once.

Imported once Django is set up (the runner does so before it needs a product).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar

from django.db.models import Model, Q, QuerySet, Sum
from django.utils import timezone

from inventory.audits import HoldCounts
from inventory.models import Stock
from inventory.product import product_of
from inventory.records import RELEASED, internal_of, public_of
from inventory.redis_lua.bucket_states import states_present
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_check
from inventory.redis_lua.reconcile import GroupCheck
from inventory.redis_lua.values import reservation_group
from inventory.totals import group_marks
from lottery.models import Draw
from lottery.selectors import pool_audit
from lottery.services import pool_create, prize_create
from orders.models import Order
from orders.selectors import voucher_audit
from orders.services import voucher_create

from .common import CONFIRMED, NO_PRIZE, WON
from .confirmations import lost_confirmations
from .verdict import POOL, VOUCHER

# Stands for an id that matched several records: equal to no announced detail.
_SEVERAL = object()


@dataclass(frozen=True)
class Supply:
    """What each run's fresh product holds (``--stock``, ``--prizes``, ``--draws-per-user``,
    ``--no-prize-weight``); a voucher uses only the stock."""

    stock: int
    prizes: int = 1
    draws_per_user: int = 1
    no_prize_weight: int = 0
    # The hold window (a voucher's payment window, a pool's claim window): 0, settled when
    # taken, but for the lifecycle's scenarios.
    hold_seconds: int = 0
    # The rows a voucher's stock is split into (``inventory.buckets``): 1, one row, unless a
    # run compares buckets (``--buckets``, the race lab's buckets).
    buckets: int = 1
    # The item's waiting room: None, open; a rate, ``queue`` at that many admissions a second.
    admission_rate: float | None = None

    @property
    def admission(self) -> dict:
        if self.admission_rate is None:
            return {}
        return {"admission": "queue", "admission_rate": self.admission_rate}

    # The item's cap on a user's abandoned holds and its cooldown after each, by name
    # (``abandon_limit``, ``abandon_cooldown_seconds``): the item's defaults where not given.
    abandon: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """The fresh voucher or pool of one run."""

    pk: int
    group_id: int


@dataclass(frozen=True)
class Sample:
    stock: int
    supplied: int
    taken: int
    # Reservations waiting in Redis to be written (redis_lua; 0 under the other strategies).
    waiting: int = 0
    # The records that took a unit, released since or not: what was written, which only grows.
    took: int = 0
    # Units left in each bucket, by bucket number (one figure for an item on one row).
    buckets: tuple[int, ...] = ()


@dataclass(frozen=True)
class Audit:
    ok: bool
    figures: dict  # fields of ``verdict.Result``
    # Records written but not yet confirmed.
    pending: int = 0
    # The lifecycle's counts: held, settled, released, returned twice, settled and released.
    holds: HoldCounts = HoldCounts()


def split_stock(total: int, parts: int) -> list[int]:
    """``total`` units over ``parts`` prizes, as even as whole units allow (the first get the rest)."""
    if parts < 1:
        raise ValueError("a pool needs at least one prize")
    share, rest = divmod(total, parts)
    return [share + (1 if i < rest else 0) for i in range(parts)]


def units_by_bucket(group_id: int) -> tuple[int, ...]:
    """Units left in each bucket of a stock group, empty ones included, by bucket number,
    read in one query over its rows (summed over a pool's prizes)."""
    units: dict[int, int] = {}
    for bucket, quantity in Stock.objects.filter(group_id=group_id).values_list("bucket", "quantity"):
        units[bucket] = units.get(bucket, 0) + quantity
    return tuple(units[bucket] for bucket in sorted(units))


def sale_window() -> dict:
    """Open now and for longer than any run."""
    now = timezone.now()
    return {"begin_at": now - timedelta(minutes=1), "end_at": now + timedelta(hours=2)}


class Product:
    """What a run needs of a product; subclasses supply the methods that raise ``NotImplementedError``."""

    name: ClassVar[str]
    # The environment variable that tells the locustfiles which one to hit.
    env_var: ClassVar[str]
    # The outcome (``loadtests/common.py``) of an answer that took a unit of stock.
    confirmed_outcome: ClassVar[str]
    # The model of the records that the audit counts (orders, draws).
    record_model: ClassVar[type[Model]]
    # The field of a record that the API announced with it (a draw's prize), or None.
    detail_field: ClassVar[str | None] = None
    # A held record's status once settled: paid, claimed.
    settle_status: ClassVar[str]

    def create(self, *, title: str, strategy: str, supply: Supply, listed: bool = False) -> Target:
        """The run's own item: unlisted, so that only the load crowd and staff see it, buy or
        draw it (``accounts.unlisted``), unless ``listed``, for a run whose anonymous open
        tabs watch its page."""
        raise NotImplementedError

    def records(self, target: Target) -> QuerySet:
        """Every record of the target, taking stock or not."""
        raise NotImplementedError

    def took(self, target: Target) -> QuerySet:
        """The records that took a unit of stock, released since or not."""
        raise NotImplementedError

    def taken(self, target: Target) -> QuerySet:
        """The records that took a unit of stock and hold it (a released one gave it back)."""
        return self.took(target).exclude(status__in=RELEASED)

    def audit(self, target: Target) -> Audit:
        raise NotImplementedError

    def announced(self, outcomes: list[list[str]]) -> list[tuple[int, int | None]]:
        """(record id, announced detail) of every confirmation in the outcome lines."""
        raise NotImplementedError

    def reservations_check(self, target: Target) -> GroupCheck:
        """The target's ``redis_lua`` state in Redis against the database (invariant 5)."""
        product = product_of(self.name)
        item = product.items().get(pk=target.pk)
        return item_reservations_check(product, item=item, reservations=reservations_client())

    def recorded(self, target: Target, ids: list[int]) -> dict[int, int | None]:
        """{id: detail} of the target's records among ``ids``, each found by the id the API
        answered with (``Record.public_id``: made of its primary key, or of its reservation's
        under ``redis_lua``)."""
        return self._read_back(target, ids, self.detail_field)

    def statuses(self, target: Target, ids: list[int]) -> dict[int, object]:
        """{id: status} of the target's records among ``ids``, found as ``recorded`` finds them."""
        return self._read_back(target, ids, "status")

    def _read_back(self, target: Target, ids: list[int], field: str | None) -> dict[int, object]:
        internal = [one for one in map(internal_of, ids) if one is not None]
        keys = [i for i in internal if reservation_group(i) is None]
        reservations = [i for i in internal if reservation_group(i) is not None]
        rows = self.records(target).filter(Q(pk__in=keys, reservation__isnull=True) | Q(reservation__in=reservations))
        found: dict[int, object] = {}
        for pk, reservation, *value in rows.values_list("pk", "reservation", *([field] if field else [])):
            public = public_of(reservation or pk)
            found[public] = _SEVERAL if public in found else (value[0] if value else None)
        return found

    def locust_env(self, target: Target) -> dict[str, str]:
        return {self.env_var: str(target.pk)}

    def waiting(self, target: Target) -> int:
        """Reservations of the target waiting in Redis to be written (``redis_lua``), in the
        stream of each of its states (a bucketed item's, one per bucket)."""
        reservations = reservations_client()
        states = [target.group_id, *states_present(reservations, target.group_id)]
        return sum(reservations.waiting(group_id=state) for state in states)

    def sample(self, target: Target) -> Sample:
        """The stock left, the units supplied so far, the records that took one, the
        reservations waiting to be written and the units left in each bucket, now."""
        marks = group_marks(group_id=target.group_id)
        return Sample(
            stock=marks.stock,
            supplied=marks.supplied,
            taken=self.taken(target).count(),
            waiting=self.waiting(target),
            took=self.took(target).count(),
            buckets=units_by_bucket(target.group_id),
        )

    def activity(self, target: Target) -> tuple[int, int, int, int]:
        """What changes while requests are in flight; the last item is the pending records."""
        stock = Stock.objects.filter(group_id=target.group_id).aggregate(
            quantity=Sum("quantity"), version=Sum("version")
        )
        records = self.records(target)
        pending = records.filter(status=self.record_model.Status.PENDING).count()
        return stock["quantity"], stock["version"], records.count(), pending

    def wait_until_quiet(self, target: Target, seconds: float = 1.0, timeout: float = 30) -> bool:
        """In-flight requests finish after Locust stops: wait until nothing has changed for
        ``seconds`` and nothing is pending; whether it did within ``timeout``."""
        give_up = time.monotonic() + timeout
        last, since = self.activity(target), time.monotonic()
        while time.monotonic() < give_up:
            time.sleep(0.2)
            now = self.activity(target)
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= seconds and now[-1] == 0:
                return True
        return False

    def wait_until_persisted(self, target: Target, timeout: float) -> float | None:
        """Under ``redis_lua``, wait until no reservation of the target waits in Redis and the
        audit counts no pending record; the moment it found so (``time.time()``), or None
        when ``timeout`` ran out first."""
        give_up = time.monotonic() + timeout
        while True:
            if self.waiting(target) == 0 and self.audit(target).pending == 0:
                return time.time()
            if time.monotonic() >= give_up:
                return None
            time.sleep(0.1)

    def confirmations(self, target: Target, outcomes: list[list[str]]) -> tuple[int, int]:
        """(units the API said were taken, confirmations the database does not bear out)."""
        announced = self.announced(outcomes)
        recorded = self.recorded(target, sorted({record_id for record_id, _ in announced}))
        confirmed = sum(1 for outcome in outcomes if outcome[0] == self.confirmed_outcome)
        return confirmed, lost_confirmations(announced, recorded)


class VoucherProduct(Product):
    name = VOUCHER
    env_var = "LOADTEST_VOUCHER"
    confirmed_outcome = CONFIRMED
    record_model = Order
    settle_status = Order.Status.PAID

    def create(self, *, title: str, strategy: str, supply: Supply, listed: bool = False) -> Target:
        voucher = voucher_create(
            title=title,
            stock=supply.stock,
            strategy=strategy,
            listed=listed,
            hold_seconds=supply.hold_seconds,
            buckets=supply.buckets,
            **supply.admission,
            **supply.abandon,
            **sale_window(),
        )
        return Target(pk=voucher.pk, group_id=voucher.group_id)

    def records(self, target: Target) -> QuerySet:
        return Order.objects.filter(voucher_id=target.pk)

    def took(self, target: Target) -> QuerySet:
        return self.records(target)

    def audit(self, target: Target) -> Audit:
        audit = voucher_audit(voucher_id=target.pk)
        return Audit(
            ok=audit.ok,
            pending=audit.pending,
            holds=audit.holds,
            figures={
                "orders": audit.orders,
                "supplied": audit.supplied,
                "oversold": audit.oversold,
                "duplicates": audit.duplicates,
                "stock_left": audit.stock,
                "conserved": audit.conserved,
                "stock_not_negative": audit.stock_not_negative,
                "totals_agree": audit.totals_agree,
            },
        )

    def announced(self, outcomes: list[list[str]]) -> list[tuple[int, int | None]]:
        return [(int(outcome[1]), None) for outcome in outcomes if outcome[0] == CONFIRMED]


class PoolProduct(Product):
    name = POOL
    env_var = "LOADTEST_POOL"
    confirmed_outcome = WON
    record_model = Draw
    detail_field = "prize_id"
    settle_status = Draw.Status.CLAIMED

    def create(self, *, title: str, strategy: str, supply: Supply, listed: bool = False) -> Target:
        pool = pool_create(
            name=title,
            draws_per_user=supply.draws_per_user,
            no_prize_weight=supply.no_prize_weight,
            strategy=strategy,
            listed=listed,
            hold_seconds=supply.hold_seconds,
            buckets=supply.buckets,
            **supply.abandon,
            **sale_window(),
        )
        for n, stock in enumerate(split_stock(supply.stock, supply.prizes), start=1):
            prize_create(pool=pool, name=f"prize {n}", stock=stock)
        return Target(pk=pool.pk, group_id=pool.group_id)

    def records(self, target: Target) -> QuerySet:
        return Draw.objects.filter(pool_id=target.pk)

    def took(self, target: Target) -> QuerySet:
        return self.records(target).filter(prize__isnull=False)

    def audit(self, target: Target) -> Audit:
        audit = pool_audit(pool_id=target.pk)
        return Audit(
            ok=audit.ok,
            pending=audit.pending,
            holds=audit.holds,
            figures={
                "awarded": audit.awarded,
                "draws": audit.draws,
                "no_prize_draws": audit.no_prize_draws,
                "supplied": audit.supplied,
                "over_awarded": audit.over_awarded,
                "users_over_limit": audit.users_over_limit,
                "draws_over_limit": audit.draws_over_limit,
                "stock_left": audit.stock,
                "conserved": audit.conserved,
                "stock_not_negative": audit.stock_not_negative,
                "totals_agree": audit.totals_agree,
            },
        )

    def announced(self, outcomes: list[list[str]]) -> list[tuple[int, int | None]]:
        # "won <draw id> <prize id>" or "no_prize <draw id>", either followed by "pending" for a 202
        return [
            (int(outcome[1]), int(outcome[2]) if outcome[0] == WON else None)
            for outcome in outcomes
            if outcome[0] in (WON, NO_PRIZE)
        ]


PRODUCTS: dict[str, Product] = {product.name: product for product in (VoucherProduct(), PoolProduct())}
