"""Reads of a product's items and records under ``redis_lua``, whatever the product
(``inventory.product``): the item a take reads, kept a second per process, the items with a
live Redis state, and the user's records with those still pending or failed in Redis."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Model, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from core.memo import ProcessMemo

from .buckets import home_bucket
from .models import Strategy
from .paging import Cursor, Page
from .product import Product
from .records import row_filter
from .redis_lua.client import REACHABLE, reservations_client
from .redis_lua.closing import close_cutoff
from .redis_lua.item_buckets import item_bucketed
from .redis_lua.values import (
    Failed,
    Pending,
    bucketed_states_allowed,
    reservation_group,
    reservation_moment,
    state_id,
    state_of,
)

# redis_lua items as a take reads them, for a second per process: (kind, id) -> item.
_reserving: ProcessMemo[tuple[str, int], Any] = ProcessMemo(ttl=1.0)


def item_for_take(product: Product, *, item_id: int) -> Any:
    """The item as a take needs it: ``product.read``, except that a ``redis_lua`` item is kept
    a second in this process.

    Its take needs nothing else of the database: the script checks the window, the limit
    and the stock against Redis, and the item's group never changes. A stale entry is
    harmless: a switch away, or a split into another number of buckets, drops the Redis state
    before it commits, so the script answers ``unavailable`` for the state the entry names (or
    ``moved``: a state of the new layout, which names its number of states) and the take reads
    the item again (``inventory.take.item_take``, :func:`item_forget`); new rules
    or a restock reach the script directly. Other strategies are read every time, so a switch to
    ``redis_lua`` is seen at once.
    """
    key = (product.kind, item_id)
    item = _reserving.get(key)
    if item is None:
        item = product.read(item_id)
        if item.strategy == Strategy.REDIS_LUA:
            _reserving.put(key, item)
    return item


def item_forget(product: Product, *, item_id: int) -> None:
    _reserving.forget((product.kind, item_id))


def items_live(product: Product, *, ended_within: float = 0) -> QuerySet:
    """The ``redis_lua`` items whose sale has not ended (or ended less than ``ended_within``
    seconds ago): those with a live Redis state. A range of the (strategy, end) index."""
    since = timezone.now() - timedelta(seconds=ended_within)
    return product.items().filter(strategy=Strategy.REDIS_LUA, end_at__gt=since)


# The shop's lists (its pages, polled by every open tab, and the API's) show a sale until this
# long after it ended: long enough to see how it went, and never every sale there ever was.
SHOWN_AFTER_END = timedelta(days=1)


def items_shown(items: QuerySet) -> QuerySet:
    """Of ``items``, those the shop lists: listed, and not ended more than ``SHOWN_AFTER_END``
    ago. A range of the (listed, end) index; an item past it is still found by its own page."""
    return items.filter(listed=True, end_at__gt=timezone.now() - SHOWN_AFTER_END)


# The beat closes the items that ended within this long before the close cutoff, so that a
# beat stopped for less still closes what ended meanwhile; older ones, ``manage.py
# reservations_close``.
CLOSING_WITHIN = timedelta(days=1)


def items_closing(product: Product, *, everything_before: bool = False) -> QuerySet:
    """The items whose Redis keys are due to be removed
    (``inventory.redis_lua.item_states.item_reservations_close``): those that ended a day or
    less before the close cutoff, or with ``everything_before`` every one before it. Of
    every strategy, since an item that left ``redis_lua`` kept some keys: a range of the
    (strategy, end) index for each strategy."""
    cutoff = close_cutoff()
    items = product.items().filter(strategy__in=Strategy.values, end_at__lte=cutoff)
    return items if everything_before else items.filter(end_at__gt=cutoff - CLOSING_WITHIN)


def record_of(product: Product, found: Pending | Failed, item: Any) -> Model:
    """A reservation read from Redis as the unsaved record it stands for (``pk`` None)."""
    failed = isinstance(found, Failed)
    status = product.record_model.Status
    record = product.unsaved(
        found, item, status=status.FAILED if failed else status.PENDING, created_at=reservation_moment(found)
    )
    record.why = found.why if failed else ""
    return record


def records_of_user(
    product: Product,
    *,
    user_id: int,
    rows: QuerySet,
    items: QuerySet | None = None,
    after: Cursor | None = None,
    size: int | None = None,
    reserved: bool = True,
) -> Page:
    """A page of the user's records, newest first (``inventory.paging``): ``rows`` (the user's)
    after the cursor ``after``, at most ``size`` (all by default), and with ``reserved``, under
    ``redis_lua``, those still pending or failed in the live ``items`` (all of them by
    default), read from Redis as unsaved records under their reservation's id.

    Its cost is the page's, whatever the user's history: the page's rows read along the
    index on (user, created_at, id), and in Redis one round trip per live ``redis_lua`` item
    (what waits there to be written, and what failed, while the item's sale lasts)."""
    unsaved = _reserved_of_user(product, user_id=user_id, rows=rows, items=items) if reserved else []
    if after is not None:
        rows = after.rows_after(rows)
        unsaved = [record for record in unsaved if Cursor.of(record) < after]
    rows = rows.order_by("-created_at", "-pk")
    # One row more than the page tells whether another page follows.
    written = list(rows if size is None else rows[: size + 1])
    records = sorted([*unsaved, *written], key=Cursor.of, reverse=True)
    if size is None or len(records) <= size:
        return Page(records, None)
    return Page(records[:size], Cursor.of(records[size - 1]))


def _reserved_of_user(product: Product, *, user_id: int, rows: QuerySet, items: QuerySet | None) -> list:
    """The user's records still pending or failed in the live ``items``, as unsaved records."""
    by_group = {product.group_of(item): item for item in (items_live(product) if items is None else items)}
    # A bucketed item's takes of a user all wait in the user's home state's stream, where the
    # item has a state per bucket: a bucketed pool keeps its rows in one (``item_bucketed``).
    states = [user_state(group_id, item_bucketed(product, item), user_id) for group_id, item in by_group.items()]
    found = reservations_of_user(group_ids=states, user_id=user_id)
    if not found:
        return []
    # Read after Redis: one persisted in between is in both, and the row tells the truth.
    persisted = set(
        rows.prefetch_related(None)
        .filter(reservation__in=[one.reservation_id for one in found])
        .values_list("reservation", flat=True)
    )
    return [
        record_of(product, one, by_group[state_of(reservation_group(one.reservation_id))[0]])
        for one in found
        if one.reservation_id not in persisted
    ]


def record_get(product: Product, *, record_id: int, user_id: int, rows: QuerySet) -> Model:
    """The user's own record by the id they know it by (``Record.public_id``), from ``rows``
    (the user's) or Redis; another user's is as good as missing (``Http404``)."""
    lookup = row_filter(record_id)
    if lookup is None:
        raise Http404("No record has this id.")
    if "reservation" not in lookup:
        return get_object_or_404(rows, **lookup)
    # Redis first: a reservation leaves the stream only after its row is committed.
    found = reservation_find(reservation=lookup["reservation"], user_id=user_id)
    if found is None:
        return get_object_or_404(rows, **lookup)
    group_id = state_of(reservation_group(lookup["reservation"]))[0]  # a bucket's state names its group
    return record_of(product, found, get_object_or_404(product.items(), **{product.group_field: group_id}))


def reservation_find(*, reservation: int, user_id: int) -> Pending | Failed | None:
    """The user's reservation while it waits (``Pending``) or once undone (``Failed``); None
    when it is neither (look for its record in the database) or is another user's."""
    with REACHABLE:
        found = reservations_client().lookup(reservation=reservation)
    if isinstance(found, Pending | Failed) and found.user_id == user_id:
        return found
    return None


def reservations_of_user(*, group_ids: list[int], user_id: int) -> list[Pending | Failed]:
    """The user's waiting and undone reservations in the given stock groups."""
    reservations = reservations_client()
    found: list[Pending | Failed] = []
    with REACHABLE:
        for group_id in group_ids:
            found += reservations.of_user(group_id=group_id, user_id=user_id)
    return found


def reservation_takes(*, group_id: int, user_id: int, buckets: int = 1) -> int:
    """The user's takes of the group in Redis, pending ones included (0 with no state): one
    HGET, for what pages poll. ``Unavailable`` when Redis cannot be reached."""
    with REACHABLE:
        return reservations_client().takes(group_id=user_state(group_id, buckets, user_id), user_id=user_id)


def user_state(group_id: int, buckets: int, user_id: int) -> int:
    """The state that holds a user's takes of a group split into ``buckets``: their home
    bucket's where the group has states of its own (``inventory.redis_lua.bucket_states``)."""
    if buckets > 1 and bucketed_states_allowed(group_id, buckets):
        return state_id(group_id, home_bucket(user_id, buckets))
    return group_id
