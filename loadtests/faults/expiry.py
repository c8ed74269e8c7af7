"""The lifecycle's faults around expiry: each on items whose takes are held for
``HOLD_SECONDS`` and a stock the crowd sells out, so that every unit is held when it
strikes, and every unit that comes back is bought again. None of them may lose a hold (none
still held once drained) or return a unit twice, and the stock stays whole
(``judge.lifecycle_broken``); each shows besides what it is there for.

Every guarded strategy releases holds with the same transaction
(``StockStrategy.expire``, ``inventory.strategies.changes.expiry_write``), so these run on
``db_atomic`` for all of them and on ``redis_lua``, whose expiry also returns their units to
Redis under the group's lock.
"""

from __future__ import annotations

import re
import time
from typing import ClassVar

import redis

from .kinds import SAFE, CeleryKill, Fault, RedisRestart, worker_kill
from .stage import Stage

# A short window, so that a run of a few seconds sees its crowd's holds come due, come back
# and be taken again; the stock a crowd of 20 to 30 users sells out in about a second.
HOLD_SECONDS = 3
STOCK = 300
# What the runs show most about, by default: the database's release and redis_lua's.
DEFAULT = ("db_atomic", "redis_lua")

# A release's return of units, as MariaDB shows the statement (a take's is "quantity - 1").
# A release's statements on the stock: the lock of its rows, which it takes first (as a take
# does), and the return of its units.
RETURN_SQL = re.compile(
    r"`quantity`\s*=\s*\(`\w+`\.`quantity`\s*\+|FROM `inventory_stock`.*FOR UPDATE", re.IGNORECASE | re.DOTALL
)


class Holding:
    """What the lifecycle's faults share: their own hold window and stock, every safe
    strategy."""

    hold_seconds: ClassVar[int | None] = HOLD_SECONDS
    stock: ClassVar[int | None] = STOCK
    strategies: ClassVar[tuple[str, ...]] = DEFAULT

    def concerns(self, strategy: str, *, deferred: bool) -> bool:
        return strategy in SAFE


def release_waiting(cursor) -> int | None:
    """The MariaDB thread of a statement returning units to the stock, or None: while the
    caller holds the stock rows, one that runs is one that waits for them. The process list,
    not ``INNODB_TRX``: InnoDB refreshes that one only when it was not read for 100 ms."""
    cursor.execute(
        "SELECT ID, INFO FROM information_schema.PROCESSLIST"
        " WHERE INFO LIKE 'UPDATE %' OR INFO LIKE 'SELECT %FOR UPDATE'"
    )
    for thread, query in cursor.fetchall():
        if RETURN_SQL.search(query):
            return int(thread)
    return None


class CeleryKillExpiry(Holding, CeleryKill):
    """The Celery worker SIGKILLed in the middle of a release of holds, and started again
    after ``--down`` seconds. To strike inside the release and not around it, the runner
    holds the group's stock rows (``SELECT ... FOR UPDATE``) from just before the first
    deadline: the worker's release (its task at the deadline, or the beat's sweep) marks its
    records released and then waits at the return of their units, uncommitted; the runner
    sees it waiting (``information_schema.PROCESSLIST``), kills the worker and lets go of
    the rows. MariaDB rolls the release back when it finds the connection gone; those
    holds' tasks died with the worker (the Redis broker hands an unacknowledged message
    to another worker only after its ``visibility_timeout``, an hour), so the restarted
    worker's sweep must release them, each once."""

    name = "celery-kill-expiry"
    summary = "the Celery worker SIGKILLed inside a release of holds and restarted: every hold released once"
    repairs_returns = True
    # The new worker boots (seconds on a loaded machine) and sweeps; under redis_lua the
    # dead worker's group lock lasts its lease.
    recover_within = 15.0
    # How long each hold of the stock rows lasts while waiting for a release: the buyers'
    # takes wait behind it too.
    gate_seconds = 0.5

    def __init__(self) -> None:
        self.caught: int | None = None
        self.due: list[int] = []

    def lasts(self, down: float) -> float:
        return HOLD_SECONDS + down

    def inject(self, stage: Stage, group_id: int) -> None:
        from django.db import connection

        try:
            self.caught, self.due = None, []
            give_up = time.monotonic() + HOLD_SECONDS + 10
            while self.caught is None and time.monotonic() < give_up:
                earliest = self._earliest(stage)
                if earliest is None or earliest > 0.3:
                    time.sleep(0.05 if earliest is None else min(0.2, earliest - 0.3))
                    continue
                self._gate(stage, group_id)
            if self.caught is None:
                worker_kill(stage)  # struck all the same; the verdict says the release was missed
        finally:
            connection.close()

    @staticmethod
    def _earliest(stage: Stage) -> float | None:
        """Seconds until the earliest held record of the run is due, or None when none is held."""
        from django.db.models import Min
        from django.utils import timezone

        from .lifecycle import held

        first = held(stage.product, stage.target).aggregate(first=Min("hold_until"))["first"]
        return None if first is None else (first - timezone.now()).total_seconds()

    def _gate(self, stage: Stage, group_id: int) -> None:
        """Hold the group's stock rows for ``gate_seconds`` at most; kill the worker the
        moment a release waits behind them."""
        from django.db import connection, transaction
        from django.utils import timezone

        from inventory.models import Stock

        from .lifecycle import held_ids

        with transaction.atomic():
            list(Stock.objects.select_for_update().filter(group_id=group_id).values_list("pk", flat=True))
            until = time.monotonic() + self.gate_seconds
            with connection.cursor() as cursor:
                while time.monotonic() < until:
                    self.caught = release_waiting(cursor)
                    if self.caught is not None:
                        self.due = held_ids(stage.product, stage.target, due_by=timezone.now())
                        worker_kill(stage)
                        return
                    time.sleep(0.005)
        time.sleep(0.05)  # a take or a write that waited goes through before the next hold

    def drained(self, product: str, target) -> tuple[list[str], list[str]]:
        from .lifecycle import released

        if self.caught is None:
            return ["the worker was not caught inside a release (killed all the same)"], []
        again = released(product, target, self.due)
        broken = [f"{again.held} of the holds due at the kill still held"] if again.held else []
        return broken, [f"killed inside a release (rolled back), {len(self.due)} holds due then: {again.words()}"]


class ExpiryLost(Holding, Fault):
    """The broker's queues and unacknowledged messages deleted (every key of Celery's Redis
    transport under the instance's ``global_keyprefix`` but its bindings) while the crowd's
    units are held: their expiry tasks (ETA tasks at their deadlines) are gone. A worker
    keeps the ETA tasks it has received in memory, unacknowledged, so the runner also cuts
    the worker's consuming connections (``CLIENT KILL``), as a broker that fails over does:
    the worker reconnects and drops what it held (Celery cancels a lost connection's
    scheduled tasks), and finds nothing to restore. The beat's sweep must then release
    every one of those holds, each once, within ``HOLDS_SWEEP_SECONDS`` plus ``margin`` of
    its deadline."""

    name = "expiry-lost"
    summary = "the broker's queues flushed with units held: their expiry tasks gone, the beat's sweep releases them"
    margin = 3.0

    def __init__(self) -> None:
        self.ahead: list[int] = []
        self.deleted = 0
        self.cut = 0

    def lasts(self, down: float) -> float:
        return 0.5

    def inject(self, stage: Stage, group_id: int) -> None:
        from django.conf import settings
        from django.db import connection
        from django.utils import timezone

        from .lifecycle import held_ids

        try:
            give_up = time.monotonic() + 5
            while not (ids := held_ids(stage.product, stage.target, ahead=timezone.now())):
                if time.monotonic() > give_up:
                    break
                time.sleep(0.05)
            self.ahead = ids
        finally:
            connection.close()
        prefix = settings.CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"]
        client = redis.Redis.from_url(stage.redis.url, socket_timeout=5)
        try:
            self.deleted = self._flush(client, prefix)
            consumers = [c for c in client.client_list() if c.get("cmd") in ("brpop", "blpop")]
            for consumer in consumers:
                client.client_kill_filter(_id=consumer["id"])
            self.cut = len(consumers)
        finally:
            client.close()

    @staticmethod
    def _flush(client: redis.Redis, prefix: str) -> int:
        """Delete the broker's queues and unacknowledged messages; the messages deleted."""
        keys = [
            key
            for key in client.scan_iter(match=f"{prefix}*", count=1000)
            if not key.decode().startswith(f"{prefix}_kombu.")
            and key.decode()[len(prefix) :].split("\x06")[0] in ("celery", "unacked", "unacked_index", "unacked_mutex")
        ]
        if not keys:
            return 0
        pipe = client.pipeline(transaction=True)
        for key in keys:
            pipe.type(key)
        types = pipe.execute()
        pipe = client.pipeline(transaction=True)
        counted = []
        for key, kind in zip(keys, types, strict=True):
            if kind == b"list":
                pipe.llen(key)
                counted.append(key)
            elif kind == b"hash":
                pipe.hlen(key)
                counted.append(key)
        pipe.delete(*keys)
        return sum(pipe.execute()[: len(counted)])

    def heal(self, stage: Stage, down: float) -> float:
        return time.time()

    def drained(self, product: str, target) -> tuple[list[str], list[str]]:
        from django.conf import settings

        from .lifecycle import released

        bound = settings.HOLDS_SWEEP_SECONDS + self.margin
        then = released(product, target, self.ahead)
        broken = []
        if not self.ahead:
            broken.append("nothing was held when the broker was flushed")
        if not self.deleted:
            broken.append("the broker held no message to delete")
        if then.held:
            broken.append(f"{then.held} of the holds whose tasks were lost still held")
        if then.late_max is not None and then.late_max > bound:
            broken.append(f"released up to {then.late_max:.1f} s after their deadline, over {bound:.0f} s")
        return broken, [f"{self.deleted} broker messages deleted, {self.cut} consumers cut; {then.words()}"]


class RedisRestartHeld(Holding, RedisRestart):
    """``redis-restart`` with the crowd's units held: Redis killed and started again empty,
    its locks, the broker's queues (the holds' expiry tasks among them) and ``redis_lua``'s
    state gone. ``redis_lua`` rebuilds its state from the database, where the held units
    are taken, and returns each once when its hold expires (by the sweep, its task lost);
    the lock strategies carry on as under ``redis-restart``."""

    name = "redis-restart-held"
    summary = "Redis restarted empty with units held: the held units stay taken, each returned once at expiry"
    strategies = ("db_atomic", "redis_lock", "redis_lua")
    # The beat sweeps once the worker reconnected (or was started again); redis_lua
    # answers 503 until a worker rebuilt the state.
    recover_within = 15.0
    # The worker holds the holds' expiry tasks unacknowledged, and kombu, restoring them on
    # the lost connection, stops it for good: the state comes back only once a new worker
    # has booted (4 s on an idle 2-core machine, twice that on a busy one), so the load
    # goes on for the whole bound.
    watched_after = recover_within

    def __init__(self) -> None:
        super().__init__()
        self.held_then: list[int] = []

    def inject(self, stage: Stage, group_id: int) -> None:
        from django.db import connection

        from .lifecycle import held_ids

        try:
            self.held_then = held_ids(stage.product, stage.target)
        finally:
            connection.close()
        super().inject(stage, group_id)

    def drained(self, product: str, target) -> tuple[list[str], list[str]]:
        from .lifecycle import released

        then = released(product, target, self.held_then)
        broken = [f"{then.held} of the holds taken before the restart still held"] if then.held else []
        return broken, [f"held at the restart: {then.words()}"]
