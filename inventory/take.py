"""The one entry point of a take, for every product and every strategy: a purchase, a draw.

The product's adapter says what the take is (``Product.take``: its rows, its per-user rule,
its record); the item's strategy takes it (``inventory.strategies``), in the request and
answered with the record written, or deferred (``redis_lua``) and answered with the record
as it will be, pending. What both products' takes share is here, once: the refusals named
in the product's own words, and the item read again when its Redis state is missing
because it switched strategy since it was read; and, where the item has a hold window,
the deadline its record is held until and a worker asked to expire it then
(``inventory.holds``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from functools import partial
from math import ceil
from random import Random
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, OperationalError, transaction
from django.db.models import Model
from django.utils import timezone

from core.outage import contended
from core.ratelimit import RateCount

from .admission.tickets import TicketHeld
from .errors import LockBusy, SoldOut, StateMissing
from .items import item_forget
from .product import Product
from .strategies import STRATEGIES
from .strategies.base import constraint_violated

logger = logging.getLogger(__name__)


def item_take(
    product: Product,
    item: Any,
    *,
    user_id: int,
    rate: RateCount | None = None,
    ticket: TicketHeld | None = None,
    now: datetime | None = None,
    rng: Random | None = None,
) -> Model:
    """One take of ``item`` by ``user_id`` under the item's strategy: the record.

    Raises the window's ``NotStarted``/``Ended``, ``product.over_limit`` when the user has
    used every take, ``AbandonLimit`` or ``CoolingDown`` when the user abandoned too many
    holds of it or one too lately (docs/design.md, "Abandoned holds"), ``product.sold_out`` when nothing
    is left, ``LockBusy`` when the
    strategy gave up under contention, ``RateLimited`` over a rate limit, and
    ``StateMissing`` (503) while a ``redis_lua`` item's Redis state is missing, and
    ``NotAdmitted`` (403) when ``ticket``, the request's admission ticket on an item with a
    waiting room, is not the user's live one (spent by the take: ``Take.ticket``). On any
    error nothing is written or reserved.

    ``now`` is the clock of the window's check in the request (Redis' own for a deferred
    take); ``rng`` the source of a choice's randomness (a system random one when None): a
    seeded ``random.Random`` makes a test's choices known.
    """
    try:
        return _take(product, item, user_id=user_id, rate=rate, ticket=ticket, now=now, rng=rng)
    except StateMissing:
        # Switched away from redis_lua since this item was read, or its stock split into another
        # number of buckets (its states laid out again: the state this take looked for is gone,
        # or says ``moved``: it keeps other users' takes now), or Redis lost the state: only the
        # last is the answer.
        item_forget(product, item_id=item.pk)
        read = product.read(item.pk)
        if STRATEGIES[read.strategy].deferred and read.buckets == item.buckets:
            raise
        # The script counted the request's rate already; it spent the ticket only if it
        # reserved, which it did not (``ticket.spend`` spends it once).
        return _take(product, read, user_id=user_id, rate=None, ticket=ticket, now=now, rng=rng)


def _take(product: Product, item: Any, *, user_id: int, rate, ticket, now, rng) -> Model:
    moment = now or timezone.now()
    take = product.take(
        item,
        user_id=user_id,
        now=now,
        rng=rng,
        hold_until=hold_until(item.hold_seconds, moment),
        rate=rate,
        ticket=ticket,
        # Called only to reserve: a seeded draw under another strategy uses up no number.
        rand=None if rng is None else lambda: rng.random(),
        kind=product.kind,
        item_id=item.pk,
        over_limit=product.over_limit,
        reserved=partial(product.reserved, item, user_id),
        **_rule_counted(product, item, user_id),
        # The cap on abandoned holds and the cooldown (``strategies.base.abandon_refuse``).
        abandon_limit=item.abandon_limit,
        abandon_cooldown=item.abandon_cooldown_seconds,
        abandon_now=moment,
    )
    try:
        record = STRATEGIES[item.strategy].take(take)
    except SoldOut as exc:
        if product.sold_out is SoldOut:
            raise
        raise product.sold_out() from exc
    except IntegrityError as exc:
        # The record's backstop refused a take past the per-user rule; or, with takes of the
        # user left, another take of theirs at once, that numbered its take as this one did (a
        # draw's ``seq``), and this one may go through when sent again.
        if any(constraint_violated(exc, name) for name in product.backstop):
            if product.counted(item.pk, user_id) < product.limit_of(item.pk):
                raise LockBusy() from exc
            raise product.over_limit() from exc
        raise
    except OperationalError as exc:
        # Chosen as a deadlock's victim, or out of time waiting for a row: rolled back whole. A
        # draw whose chosen prize ran out under its guard chooses again in the same transaction,
        # holding the row it missed (MariaDB keeps the lock of a row an UPDATE waited for):
        # against an expiry that locks its rows in key order, the two can deadlock.
        if contended(exc):
            raise LockBusy() from exc
        raise
    if record.hold_until is not None:
        hold_expire_later(product, item.pk, [record.hold_until])
    return record


def _rule_counted(product: Product, item: Any, user_id: int) -> dict[str, Any]:
    """How an unguarded strategy counts the user's takes against the per-user rule, for the
    running totals of takes past it (``over_counted``); a guarded one never writes past it."""
    if STRATEGIES[item.strategy].guarded:
        return {}
    return {"counted": partial(product.counted, item.pk, user_id), "allowed": partial(product.limit_of, item.pk)}


def hold_until(seconds: int, start: datetime) -> datetime | None:
    """The deadline of a hold of ``seconds`` taken at ``start``: None when the item has no
    hold window (0)."""
    return start + timedelta(seconds=seconds) if seconds else None


# The task that expires an item's holds at their deadline (``inventory.tasks``), sent by name:
# the tasks run the take's core, which stands below them.
HOLDS_EXPIRE_TASK = "inventory.tasks.holds_expire"

# (kind, item, deadline second) whose expiry this process asked for lately: a crowd's holds
# due in the same second are expired by one task.
_asked: set[tuple[str, int, int]] = set()


def hold_expire_later(product: Product, item_id: int, deadlines: list[datetime | None]) -> None:
    """Once the caller's transaction commits, ask a worker to expire the item's holds at
    ``deadlines`` (one task per second of them, per process).

    Only within ``HOLD_TASK_HORIZON_SECONDS``: the Redis broker hands a message that was not
    acknowledged within its ``visibility_timeout`` to another worker, and a task held back
    until a later deadline would be delivered again and again meanwhile. A longer hold, and
    a task lost with its broker, are expired by the beat's sweep. A broker out of reach is
    logged, not raised: the take stands, and the sweep expires it."""
    horizon = timezone.now() + timedelta(seconds=settings.HOLD_TASK_HORIZON_SECONDS)
    seconds = {ceil(when.timestamp()) for when in deadlines if when is not None and when <= horizon}
    asks = [
        (product.kind, item_id, second) for second in sorted(seconds) if (product.kind, item_id, second) not in _asked
    ]
    if not asks:
        return

    def send() -> None:
        # Noted as asked once sent, after the commit: noted before it, a take rolled back (a
        # batch of records written again half by half) left its seconds asked for with no task.
        if len(_asked) > 10_000:
            _asked.clear()
        due = [ask for ask in asks if ask not in _asked]  # another take of the transaction sent it
        _asked.update(due)
        for kind, item, second in due:
            try:
                eta = datetime.fromtimestamp(second, tz=UTC)
                current_app.send_task(HOLDS_EXPIRE_TASK, args=(kind, item), eta=eta)
            except Exception:
                _asked.discard((kind, item, second))
                logger.warning("Could not schedule the expiry of %s %s's holds; the sweep will.", kind, item)

    transaction.on_commit(send)
