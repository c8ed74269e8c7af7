"""Persisting ``redis_lua`` reservations: pending entries in Redis become records in the
database, exactly once.

The product says how its records are written (``write``) and which reservations already
have one (``persisted``); this module owns the rest, the same for both products: reading
the pending entries through the stream's consumer group (with those of a dead consumer),
writing a batch in one transaction together with the stock rows' decrement, and
acknowledging only after the commit. A reservation whose record already exists (a
redelivery, or a consumer that died between the commit and the acknowledgement) is only
acknowledged. One that the database refuses for good is undone (``Reservations.release``:
stock and take back in Redis, marked failed) without holding back the rest of its batch.
While the database is unreachable nothing is acknowledged, and reservations older than
``give_up_seconds`` are undone, so that no user waits on a pending order for ever.

Several consumers may persist one group at once (``inventory.redis_lua.drain``). Each batch's
transaction first locks its stock rows (``_stock_locked``: the rows of its state's bucket and
those its reservations name), in primary-key order, then re-checks which reservations have a
record and which were undone meanwhile: an INSERT of records takes a shared lock on the stock
row they name (their foreign key), and the UPDATE after it an exclusive one, so two consumers
that inserted first would each wait for the other (deadlock). An undo re-checks under the
same locks that no record exists: between two consumers handed one reservation (one took
over the other's after ``claim_idle_ms``), the record and the undo exclude each other.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from django.db import DatabaseError, IntegrityError, transaction
from redis import RedisError

from core.outage import database_unreachable

from ..models import Stock
from ..records import public_of
from ..strategies.base import units_out
from .client import Reservations
from .values import GroupKeys, Pending, reservation_id, state_of

logger = logging.getLogger(__name__)


@dataclass
class Persisted:
    """What one call did: records ``written``, reservations ``repeated`` (their record was
    already there), and reservations ``failed`` (undone)."""

    written: int = 0
    repeated: int = 0
    failed: int = 0

    def __iadd__(self, other: Persisted) -> Persisted:
        self.written += other.written
        self.repeated += other.repeated
        self.failed += other.failed
        return self

    @property
    def handled(self) -> int:
        return self.written + self.repeated + self.failed


def reservations_persist(
    *,
    group_id: int,
    reservations: Reservations,
    consumer: str,
    persisted: Callable[[list[int]], set[int]],
    write: Callable[[list[Pending]], None],
    prepare: Callable[[list[Pending]], None] | None = None,
    batch: int = 500,
    claim_idle_ms: int = 30_000,
    give_up_seconds: float = 300,
    kind: str = "",
    item_id: int | None = None,
) -> Persisted:
    """Persist up to ``batch`` pending reservations of one stock group.

    Arguments:
        consumer: this worker's name in the stream's consumer group.
        persisted: given reservation ids, those that already have a record.
        write: writes the records of the given reservations (in the caller's transaction).
        prepare: called with the reservations of each transaction before it begins, so that
            ``write`` finds their records ready (``inventory.redis_lua.records_insert``): the
            transaction holds its stock rows, which the other consumers of its state wait for.
        claim_idle_ms: reservations given to another consumer this long ago without an
            acknowledgement are taken over (that consumer died or hangs).
        give_up_seconds: while the database cannot be reached (not when it refuses, deadlocks
            or waits for a lock), reservations this old are undone.
        kind, item_id: what the group sells (``voucher`` 3, ``pool`` 1), for the log lines.

    Each reservation gets a log line once its fate is known (``written``, ``repeated``: its
    record was already there, or ``failed``: undone), carrying the id of the request that
    made it; the batch gets one more.

    Raises the database's error when it is unreachable (the caller retries later).
    """
    started = time.perf_counter()
    pending = reservations.pending(group_id=group_id, consumer=consumer, count=batch, claim_idle_ms=claim_idle_ms)
    if not pending:
        return Persisted()
    about = _About(group_id, kind, item_id)
    committed: list[Pending] = []
    try:
        result = _write_apart(
            pending, persisted, write, group_id=group_id, reservations=reservations, about=about, committed=committed,
            prepare=prepare,
        )  # fmt: skip
    except DatabaseError as exc:
        if database_unreachable(exc):
            # A part written before the database went away has its records: never undo those.
            written = {one.reservation_id for one in committed}
            _give_up_old(
                about, reservations, [one for one in pending if one.reservation_id not in written], give_up_seconds
            )
            # Not a dead consumer's: the retried drain, wherever it runs, takes them at once.
            with suppress(RedisError):
                reservations.hand_back(group_id=group_id, consumer=consumer, entry_ids=[o.entry_id for o in pending])
        raise
    # Released entries were acknowledged by their release; acknowledging again is harmless.
    reservations.done(group_id=group_id, pending=pending)
    about.batch(result, time.perf_counter() - started)
    return result


# A refused part smaller than this is written one reservation at a time (``_write_apart``).
WRITTEN_ALONE_BELOW = 16


def _write_apart(
    pending: list[Pending],
    persisted: Callable,
    write: Callable,
    *,
    group_id: int,
    reservations: Reservations,
    about: _About,
    committed: list[Pending],
    prepare: Callable | None = None,
) -> Persisted:
    """Write ``pending`` in one transaction; when the database refuses one of them, write
    each half apart, and a part of fewer than ``WRITTEN_ALONE_BELOW`` one reservation at a
    time, so that those it refuses are undone alone.

    One reservation the database refuses must not hold back its batch, nor cost a
    transaction per reservation: one refused among 500 costs about 25 transactions, where
    writing each apart took 500. Small parts are not halved: when many of their reservations
    are refused (a batch of users deleted since), halving down to each would cost twice as
    many transactions as writing them one at a time. ``committed`` collects the
    reservations whose records a committed part holds.
    """
    try:
        if prepare is not None:
            prepare(pending)
        fresh = _write(pending, persisted, write, group_id=group_id, reservations=reservations)
    except IntegrityError as exc:
        if len(pending) > 1:
            half = len(pending) // 2
            parts = (
                [pending[:half], pending[half:]] if len(pending) >= WRITTEN_ALONE_BELOW else [[one] for one in pending]
            )
            result = Persisted()
            for part in parts:
                result += _write_apart(
                    part,
                    persisted,
                    write,
                    group_id=group_id,
                    reservations=reservations,
                    about=about,
                    committed=committed,
                    prepare=prepare,
                )
            return result
        # The buyer reads ``why``; the database's own words (keys, values) are for the log.
        logger.warning("reservation %s: the database refused its record: %s", pending[0].reservation_id, exc.args[-1])
        why = "the database refused the record"
        return _undo_unless_written(
            pending[0], persisted, why, group_id=group_id, reservations=reservations, about=about
        )
    committed.extend(pending)
    about.each(pending, fresh)
    return Persisted(written=len(fresh), repeated=len(pending) - len(fresh))


@transaction.atomic
def _write(
    pending: list[Pending], persisted: Callable, write: Callable, *, group_id: int, reservations: Reservations
) -> list[Pending]:
    """Write the records of the reservations that have none yet and were not undone; those,
    once committed. The batch's stock rows are locked first (``_stock_locked``), so that what
    is read next stays true until the commit."""
    taken = _stock_locked(group_id, pending)
    already = persisted([one.reservation_id for one in pending])
    fresh = [one for one in pending if one.reservation_id not in already]
    undone = _undone(fresh, group_id=group_id, reservations=reservations)
    fresh = [one for one in fresh if one.reservation_id not in undone]
    if fresh:
        write(fresh)
        units = Counter(one.stock_id for one in fresh if one.stock_id is not None)
        for stock_id in taken:  # rows in key order, as every writer takes them
            if units[stock_id]:
                Stock.objects.filter(pk=stock_id).update(**units_out(units[stock_id]))
    return fresh


def _stock_locked(state: int, pending: list[Pending]) -> list[int]:
    """Lock the stock rows a batch of the state's reservations must hold (``SELECT ... FOR
    UPDATE`` by primary key, ascending, as every writer of stock takes them) for the caller's
    transaction; their ids.

    Those are the rows of the state's bucket (its anchor: every batch and every undo of the
    state holds it, a reservation that names no row, a draw of nothing, included) and the rows
    its reservations name (a borrowed unit names another bucket's row, which the UPDATE
    writes). An unbucketed group's rows are all of bucket 0: it locks every row, as one state.
    A bucket with no row of its own (never made by a split) anchors on every row of the group.

    Why no more: a reservation lives in one state's stream (its id carries the state,
    ``values.reservation_id``), and a consumer reads and takes over entries of one stream
    only, so every write and every undo of one reservation run for the same state, and both
    lock that state's anchor and the reservation's row: they exclude each other. Both read
    the same anchor, unlocked: a row never changes bucket, and a split adds rows under the
    group's lock held exclusive (``drain.group_lock``), beside which no drain runs. Batches of
    different buckets' streams share no row unless one holds a unit borrowed from the
    other's bucket, and then wait for each other only for that row, never in a cycle: each
    takes all its locks in one statement, in key order.
    """
    group_id, bucket = state_of(state)
    rows = Stock.objects.filter(group_id=group_id)
    anchor = set(rows.filter(bucket=bucket).values_list("pk", flat=True)) or set(rows.values_list("pk", flat=True))
    wanted = anchor | {one.stock_id for one in pending if one.stock_id is not None}
    locked = Stock.objects.filter(pk__in=wanted).order_by("pk").select_for_update()
    return list(locked.values_list("pk", flat=True))


def _undone(pending: list[Pending], *, group_id: int, reservations: Reservations) -> set[int]:
    """The reservations of ``pending`` that were undone (marked failed): another consumer,
    handed them too, found the database refusing them. One round trip."""
    if not pending:
        return set()
    first = reservation_id(group_id, 1)
    marks = reservations.client.hmget(
        GroupKeys.of(group_id).failed, [one.reservation_id - first + 1 for one in pending]
    )
    return {one.reservation_id for one, mark in zip(pending, marks, strict=True) if mark is not None}


def _undo_unless_written(
    one: Pending, persisted: Callable, why: str, *, group_id: int, reservations: Reservations, about: _About
) -> Persisted:
    """Undo ``one``, which the database refused, unless its record exists: another consumer,
    handed it too, may have written it. Under the locks of its state's anchor and its own row
    (``_stock_locked``), which every batch that writes it holds from before its check until
    its commit, so that no record can commit between this check and the undo."""
    with transaction.atomic():
        _stock_locked(group_id, [one])
        if persisted([one.reservation_id]):
            about.each([one], [])
            return Persisted(repeated=1)
        if reservations.release(group_id=group_id, pending=one, why=why):
            about.failed(one, why)
            return Persisted(failed=1)
    return Persisted()


class _About:
    """The log lines of one group's persisting: one per reservation, with the id of the
    request that made it (not the drain task's: a batch holds many requests' reservations),
    what it became and how long it waited for its row; and one per batch."""

    def __init__(self, group_id: int, kind: str, item_id: int | None) -> None:
        self.group_id = group_id
        self.kind = kind or "group"
        self.item_id = group_id if item_id is None else item_id

    def each(self, pending: list[Pending], fresh: list[Pending]) -> None:
        if not logger.isEnabledFor(logging.INFO):
            return
        written = {one.reservation_id for one in fresh}
        now_ms = time.time() * 1000
        for one in pending:
            self._one(logging.INFO, one, "written" if one.reservation_id in written else "repeated", now_ms)

    def failed(self, one: Pending, why: str) -> None:
        self._one(logging.WARNING, one, "failed", time.time() * 1000, why)

    def _one(self, level: int, one: Pending, outcome: str, now_ms: float, why: str = "") -> None:
        waited = round(max(0.0, now_ms - one.at_ms))
        fields = {
            "event": "reservation",
            "request_id": one.request_id or None,
            "kind": self.kind,
            "item_id": self.item_id,
            "group_id": self.group_id,
            "reservation_id": one.reservation_id,
            # The id its buyer was shown (``Record.public_id``): what they quote.
            "record_id": public_of(one.reservation_id),
            "user_id": one.user_id,
            "stock_id": one.stock_id,
            "outcome": outcome,
            "waited_ms": waited,
        }
        if why:
            fields["why"] = why
        logger.log(
            level,
            "reservation %s (shown as %s) of %s %s for user %s %s after %s ms%s",
            one.reservation_id, fields["record_id"], self.kind, self.item_id, one.user_id, outcome, waited,
            f": {why}" if why else "",
            extra=fields,
        )  # fmt: skip

    def batch(self, result: Persisted, seconds: float) -> None:
        ms = round(seconds * 1000, 1)
        logger.info(
            "persisted %s %s: %s written, %s repeated, %s failed in %s ms",
            self.kind, self.item_id, result.written, result.repeated, result.failed, ms,
            extra={
                "event": "reservations.batch", "kind": self.kind, "item_id": self.item_id, "group_id": self.group_id,
                "written": result.written, "repeated": result.repeated, "failed": result.failed, "ms": ms,
            },
        )  # fmt: skip


def _give_up_old(about: _About, reservations: Reservations, pending: list[Pending], seconds: float) -> None:
    oldest_kept_ms = (time.time() - seconds) * 1000
    why = "the database was unreachable for too long"
    for one in pending:
        if one.at_ms < oldest_kept_ms and reservations.release(group_id=about.group_id, pending=one, why=why):
            about.failed(one, why)
