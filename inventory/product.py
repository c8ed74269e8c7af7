"""The adapter contract of the item core: what a product (the flash sale's vouchers, the prize
draw's pools) tells the core once, and the registry the core finds it in by its kind.

The core owns everything both products do alike: the take's one entry point under every
strategy and its refusals (``inventory.take``), the item's ``redis_lua`` state through its
life (load, start, open, change, retire, check, reconcile:
``inventory.redis_lua.item_states``), persisting its reservations as records and the tasks
that do so (``inventory.tasks``), the memo of the item a take reads and the reads of the
records still pending or failed (``inventory.items``). A product supplies only what makes it
different, below.

The products stand a tier above ``inventory`` (``tests/test_layers.py``): the core never
imports them. Each registers its adapter from its ``AppConfig.ready()``
(:func:`product_register`), and the core finds it by kind (:func:`product_of`), the kind
every task message carries.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from datetime import datetime
from random import Random
from typing import TYPE_CHECKING, Any, ClassVar

from django.db.models import Count, Model, QuerySet

from core.errors import DomainError

from .errors import SoldOut
from .records import RELEASED
from .redis_lua.values import Failed, Pending, Reserved, Rules

if TYPE_CHECKING:
    from .strategies.base import Take


class Product(ABC):
    """One product's adapter: filled in once per product, stateless.

    Attributes:
        kind: its name in task messages, log lines and metrics (``"voucher"``, ``"pool"``).
        item_model: what is sold or drawn (``Voucher``, ``Pool``): it has ``strategy``,
            ``begin_at`` and ``end_at``, and one stock group, whose rows are its stock.
        record_model: what a take writes (``Order``, ``Draw``): it has ``user_id``,
            ``reservation``, ``created_at``, ``Status`` (``PENDING``, ``FAILED``) and the
            stock row it took (``unit_field``).
        item_field: the record's foreign key to its item (``"voucher"``, ``"pool"``).
        group_field: the item's column of its stock group (``"group_id"``).
        over_limit: raised when the user has used every take (``AlreadyPurchased``, ``DrawLimit``).
        sold_out: raised when nothing is left (``SoldOut``, or the product's own).
        backstop: the names of the record's unique constraint behind the per-user rule
            (as MySQL and as SQLite name it): a guarded take it refuses is ``over_limit``.

    The lifecycle (``inventory.holds``, docs/design.md "Lifecycle"):
        settled: the status a held record is settled to (``paid``, ``claimed``).
        lapsed: the status it lapses to at its deadline (``expired``, ``forfeited``).
        unit_field: the record's column of the stock row it took its unit from, None when it
            took nothing (``"stock_id"``): written with the record, by the take's ``record``
            and by ``rows``.
        release_clears: the record's column that carries the user's id into the backstop,
            cleared by a release that gives the user the take back (a voucher's buyer may
            buy again); None where a released record still counts (a forfeited draw).

    Buckets (``inventory.buckets``, docs/design.md "Buckets"):
        routes_home: a bucketed item's take starts at the user's home bucket (a voucher's);
            False where the product routes each take by weight instead (a pool's draw, whose
            take carries its ``route``). Under ``redis_lua`` only an item whose takes route
            home gets a state per bucket: its take runs where the user's takes are marked. A
            draw's bucket is chosen by the stock of every bucket, which no one state can
            check atomically, so a bucketed pool keeps its rows in one state.
    """

    kind: ClassVar[str]
    item_model: ClassVar[type[Model]]
    record_model: ClassVar[type[Model]]
    item_field: ClassVar[str]
    group_field: ClassVar[str]
    over_limit: ClassVar[type[DomainError]]
    sold_out: ClassVar[type[DomainError]] = SoldOut
    backstop: ClassVar[tuple[str, ...]]
    settled: ClassVar[str]
    lapsed: ClassVar[str]
    unit_field: ClassVar[str]
    release_clears: ClassVar[str | None] = None
    routes_home: ClassVar[bool] = True

    @property
    def release_frees_take(self) -> bool:
        return self.release_clears is not None

    @abstractmethod
    def take(
        self,
        item: Any,
        *,
        user_id: int,
        now: datetime | None,
        rng: Random | None,
        hold_until: datetime | None,
        **carried: Any,
    ) -> Take:
        """The take of one unit of ``item`` by ``user_id`` (``inventory.strategies.base.Take``):
        its group, chooser, per-user rule's ``check`` (which reads :meth:`taking_of`), record
        and ``admit`` (the window's check at ``now``, the stock read unguarded); ``rng``, when
        not None, the source of its choice's randomness; ``hold_until``, when not None, the
        deadline a record that took a unit is held until (``held``), settled when taken
        otherwise. ``carried`` are the fields the core fills in for every product (the user's
        rate limits, the item for a deferred take, its pending answer): passed to ``Take`` as they are."""

    def items(self) -> QuerySet:
        """Every item, read as the core reads it."""
        return self.item_model.objects.all()

    def group_of(self, item: Any) -> int:
        """The item's stock group."""
        return getattr(item, self.group_field)

    @abstractmethod
    def read(self, item_id: int) -> Any:
        """The item as a take reads it (``Http404`` when there is none)."""

    @abstractmethod
    def rules(self, item: Any) -> Rules:
        """What the reserving script checks besides the stock: the window, the takes per user
        and the weight of taking nothing."""

    def records(self, item_id: int) -> QuerySet:
        """The item's records."""
        return self.record_model.objects.filter(**{f"{self.item_field}_id": item_id})

    def takes(self, records: QuerySet) -> tuple[dict[int, int], Iterable[tuple[int, int]]]:
        """Each user's records, and the ``(user id, take number)`` of every record, in one
        read of ``records``: by default the numbers are 1 to each user's records."""
        takers = dict(records.values("user_id").annotate(n=Count("id")).values_list("user_id", "n"))
        return takers, [(user_id, n) for user_id, count in takers.items() for n in range(1, count + 1)]

    def limit_of(self, item_id: int) -> int:
        """The per-user rule's limit as the item stands now (read again: it may change)."""
        return self.rules(self.items().get(pk=item_id)).limit

    def counted(self, item_id: int, user_id: int) -> int:
        """How many of the user's records of the item count against the per-user rule."""
        return self.taking_of(item_id, user_id).count()

    def taking_of(self, item_id: int, user_id: int) -> QuerySet:
        """The user's records of the item that count against the per-user rule."""
        return self.taking(self.records(item_id).filter(user_id=user_id))

    def taking(self, records: QuerySet) -> QuerySet:
        """The records that count against the per-user rule: a released one does not
        when its release frees the take. The rule's one statement: the take's check, the
        pages' and audits' reads, the running totals and the ``redis_lua`` state all
        count through here."""
        if self.release_frees_take:
            return records.exclude(status__in=RELEASED)
        return records

    @abstractmethod
    def rows(self, item_id: int, fresh: list[Pending]) -> list[Model]:
        """The confirmed records of reservations persisted now, unsaved (written in bulk),
        each under its reservation's id and through the product's backstop guard."""

    @abstractmethod
    def reserved(self, item: Any, user_id: int, reserved: Reserved) -> Model:
        """The answer of a reservation just made: the record as it will be, pending, unsaved."""

    @abstractmethod
    def unsaved(self, found: Pending | Failed, item: Any, **fields: Any) -> Model:
        """A reservation read from Redis as an unsaved record for the reads, with ``fields``
        (its ``status`` and ``created_at``) that the core fills in."""


_products: dict[str, Product] = {}


def product_register(product: Product) -> None:
    """Make ``product`` known to the core under its kind (from its app's ``ready()``)."""
    _products[product.kind] = product


def product_of(kind: str) -> Product:
    """The product of that kind; ``LookupError`` for a kind nobody registered."""
    try:
        return _products[kind]
    except KeyError:
        raise LookupError(f"no product of kind {kind!r} is registered") from None


def products() -> list[Product]:
    """Every registered product, in the order they registered."""
    return list(_products.values())
