"""Reservations in Redis for the ``redis_lua`` strategy: one script call per take, and the
client every process runs them over (:func:`reservations_client`); a redis-py client (or
``RedisCluster``) and a group's id are all it needs (scripts: ``.scripts``; values: ``.values``).
With ``wait_replicas``, a reservation no replica confirmed in time says so, and a worker is
handed only those the replicas have: a master that dies takes none acknowledged or written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import redis
from django.conf import settings
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException

from core.errors import Unavailable
from core.redis_cluster import cluster_redis, replicated, server_of
from core.redis_script import function_on_own_connections
from locking.integration import locks_redis, locks_redis_options

from ..admission.tickets import TicketHeld
from . import scripts
from .abandoned import abandoned_load
from .consumers import ACKNOWLEDGE
from .returns import RETURN
from .values import (
    HANDED_BACK_IDLE_MS,
    PERSIST_GROUP,
    SETTLED,
    USER_TAKES_READ,
    Failed,
    GroupKeys,
    Pending,
    PendingReservations,
    Reserved,
    Rules,
    group_tag,
    lost_counter_floor,
    marks_of,
    marks_value,
    reservation_group,
    reservation_id,
    rows_value,
    rules_value,
    stock_of,
    taken_field,
    takers_of,
    text_of,
)
from .windows import SET_RULES, windows_read

if TYPE_CHECKING:
    from core.ratelimit import RateCount


class Reservations:
    """The scripts of ``inventory.redis_lua.scripts`` bound to one Redis client; with
    ``wait_replicas``, reservations confirmed by that many replicas within ``wait_ms``."""

    def __init__(self, client: redis.Redis | RedisCluster, *, wait_replicas: int = 0, wait_ms: int = 100) -> None:
        self.client = client
        self.wait = (wait_replicas, wait_ms) if wait_replicas else None
        # Every purchase and draw calls it: as a Redis function, over the thread's own connection (core.redis_script).
        self._reserve = function_on_own_connections(client, scripts.RESERVE, prefix="flashsale_reserve")
        self._release = client.register_script(scripts.RELEASE)
        self._load = client.register_script(scripts.LOAD)
        self._drop = client.register_script(scripts.DROP)
        self._kick = client.register_script(scripts.KICK)
        self._add_units = client.register_script(scripts.ADD_UNITS)
        self._set_rules = client.register_script(SET_RULES)
        self._repair = client.register_script(scripts.REPAIR)
        self._return = client.register_script(RETURN)
        self._acknowledge = client.register_script(ACKNOWLEDGE)

    def reserve(
        self,
        *,
        group_id: int,
        user_id: int,
        rand: float,
        kick_ms: int = 200,
        request_id: str = "",
        rate: RateCount | None = None,
        states: int = 1,
        ticket: TicketHeld | None = None,
    ) -> Reserved:
        """Reserve one unit of the group for ``user_id`` in one round trip.

        Arguments:
            rand: a uniform random number in [0, 1) that makes the weighted choice.
            kick_ms: how long one caller's ask for persisting stands for everyone (no other
                reservation answers ``kick`` meanwhile, unless a drain ``rearm``-ed since).
            request_id: kept with the reservation, for the worker's log line.
            rate: the request's rate limits, counted first, in the same round trip; over
                one, nothing is reserved and the answer is ``rate_limited`` with ``wait_ms``.
            states: how many states the caller's item is spread over; a state that says
                another number answers ``moved``, nothing reserved.
            ticket: the take's admission ticket, spent in the same round trip (its room in this
                Redis): not the user's live one, ``not_admitted``, nothing reserved.
        """
        if not 0 <= rand < 1:
            raise ValueError(f"rand must be in [0, 1), got {rand!r}")
        keys = GroupKeys.of(group_id)
        rate_keys, rate_args = ([], []) if rate is None else (rate.keys(tag=group_tag(group_id)), rate.args())
        ticket_keys, ticket_args = ([], ["", ""]) if ticket is None else (ticket.spend_keys, ticket.spend_args())
        answer = self._reserve(
            keys=[keys.state, keys.pending, keys.abandoned, *ticket_keys, *rate_keys],
            args=[user_id, repr(rand), kick_ms, request_id, states, *ticket_args, *rate_args],
            wait=self.wait,
        )
        answer, replicas = answer if self.wait else (answer, 0)
        status, *said = text_of(answer).split(" ")
        if status in ("rate_limited", "cooling_down"):
            return Reserved(refusal=status, wait_ms=int(said[0]))
        if status != "ok":
            return Reserved(refusal=status)
        chosen, seq, number, marks, kick, limit = said
        return Reserved(
            refusal=None,
            stock_id=int(chosen) if chosen else None,
            seq=int(seq),
            reservation_id=reservation_id(group_id, int(number)),
            takes=marks_of(marks)[0],
            kick=kick == "1",
            limit=int(limit),
            unconfirmed=self.wait is not None and replicas < self.wait[0],
        )

    def hold_kick(self, *, group_id: int, ms: int) -> None:
        """Set the group's kick flag for ``ms``: a drain that is reading the stream takes
        what arrives, so no reservation meanwhile asks for another."""
        self._kick(keys=[GroupKeys.of(group_id).state], args=[ms])

    def rearm(self, *, group_id: int) -> None:
        """Clear the group's kick flag: call before reading the stream to persist it, so
        that any reservation the read misses asks for persisting again."""
        self._kick(keys=[GroupKeys.of(group_id).state], args=[""])

    def claim_rebuild(self, *, group_id: int, ms: int = 1000) -> bool:
        """True for the first caller in ``ms`` to find the state missing: it asks for a rebuild."""
        return bool(self.client.set(GroupKeys.of(group_id).rebuild, 1, nx=True, px=ms))

    def lookup(self, *, reservation: int) -> Pending | Failed | str | None:
        """Where a reservation stands, as far as Redis knows: ``Pending`` while it waits, ``Failed``
        once undone, ``SETTLED`` when neither (its record written, or lost), None for no such id."""
        group_id = reservation_group(reservation)
        if group_id is None:
            return None
        keys = GroupKeys.of(group_id)
        number = reservation - reservation_id(group_id, 1) + 1
        pipe = self.multi(group_id=group_id)  # undoing moves it between the two
        pipe.xrange(keys.pending, f"{number}-0", f"{number}-0")
        pipe.hget(keys.failed, number)
        entries, failed = pipe.execute()
        if entries:
            return Pending.from_entry(group_id, *entries[0])
        if failed is not None:
            return Failed.from_field(group_id, number, failed)
        return SETTLED

    def multi(self, *, group_id: int) -> redis.client.Pipeline:
        """A pipeline of the group's keys run in one ``MULTI``, on the server that holds them."""
        return server_of(self.client, GroupKeys.of(group_id).state).pipeline(transaction=True)

    def of_user(self, *, group_id: int, user_id: int) -> list[Pending | Failed]:
        """The user's reservations of the group waiting (of the latest ``USER_TAKES_READ`` takes, by
        the numbers RESERVE keeps beside them) or undone (by those RELEASE keeps, ``u:<user>``)."""
        keys = GroupKeys.of(group_id)
        mark = self.client.hget(keys.state, user_id)
        takes = marks_of(mark)[1][-USER_TAKES_READ:] if mark is not None else []
        numbers = self.client.hmget(keys.state, [taken_field(user_id, take) for take in takes]) if takes else []
        pipe = self.multi(group_id=group_id)  # an undo moves one from the stream to the numbers
        for number in (int(found) for found in numbers if found is not None):
            pipe.xrange(keys.pending, f"{number}-0", f"{number}-0")
        pipe.hget(keys.failed, f"u:{user_id}")
        *entries, undone = pipe.execute()
        undone = text_of(undone or b"").split()  # their fields, once written, never change
        failed = zip(undone, self.client.hmget(keys.failed, undone) if undone else (), strict=True)
        found = [Pending.from_entry(group_id, *one[0]) for one in entries if one]
        found += [Failed.from_field(group_id, number, value) for number, value in failed if value is not None]
        return [one for one in found if one.user_id == user_id]

    def release(self, *, group_id: int, pending: Pending, why: str) -> bool:
        """Undo a reservation that cannot be persisted (stock and take back, failed ``why``) if
        still pending; True when this call undid it."""
        keys = GroupKeys.of(group_id)
        number = pending.reservation_id - reservation_id(group_id, 1) + 1
        stock = "" if pending.stock_id is None else pending.stock_id
        args = [pending.entry_id, PERSIST_GROUP, pending.user_id, stock, number, why, pending.seq, pending.at_ms]
        return bool(self._release(keys=[keys.state, keys.pending, keys.failed], args=args))

    def failed(self, *, reservation: int) -> Failed | None:  # as undone, or None
        group_id = reservation_group(reservation)
        if group_id is None:
            return None
        number = reservation - reservation_id(group_id, 1) + 1
        value = self.client.hget(GroupKeys.of(group_id).failed, number)
        return None if value is None else Failed.from_field(group_id, number, value)

    def pending(self, *, group_id: int, consumer: str, count: int = 500, claim_idle_ms: int = 30_000) -> list[Pending]:
        """Up to ``count`` reservations of the group for ``consumer`` to persist: first those
        another consumer was given ``claim_idle_ms`` ago or more without acknowledging them
        (it died, or is stuck), then new ones."""
        key = GroupKeys.of(group_id).pending
        try:
            claimed = self.client.xautoclaim(key, PERSIST_GROUP, consumer, claim_idle_ms, "0-0", count=count)
        except redis.ResponseError as exc:
            if str(exc).startswith("NOGROUP"):  # no stream yet (never loaded, or Redis lost it)
                return []
            raise
        # [next id, entries, (Redis 7) deleted ids]; an entry deleted since is (id, None).
        entries = [(entry_id, fields) for entry_id, fields in claimed[1] if fields]
        if len(entries) < count:
            answer = self.client.xreadgroup(PERSIST_GROUP, consumer, {key: ">"}, count=count - len(entries))
            entries += answer[0][1] if answer else []
        if entries and self.wait and not replicated(self.client, key, *self.wait):
            # Not on the replicas yet: written, it could outlive the master that made it.
            self.hand_back(group_id=group_id, consumer=consumer, entry_ids=[entry_id for entry_id, _ in entries])
            return []
        return windows_read(self.client, group_id, entries)  # each one with its hold window

    def hand_back(self, *, group_id: int, consumer: str, entry_ids: list[str]) -> None:
        """Give back entries ``consumer`` was handed and could not write (the database was
        out of reach): they stay unacknowledged, but look idle long enough that the next
        ``pending``, of any consumer, takes them over at once instead of after its
        ``claim_idle_ms``. Whatever a lost COMMIT answer may have written of them is found
        by its record's unique reservation."""
        if entry_ids:
            key = GroupKeys.of(group_id).pending
            self.client.xclaim(key, PERSIST_GROUP, consumer, 0, entry_ids, idle=HANDED_BACK_IDLE_MS, justid=True)

    def done(self, *, group_id: int, pending: list[Pending]) -> None:
        """Acknowledge and drop committed entries, and their takes' list fields where these still
        name them, in one script (``consumers.ACKNOWLEDGE``)."""
        if pending:
            keys, args = GroupKeys.of(group_id), [PERSIST_GROUP]
            for one in pending:
                args += [one.entry_id, taken_field(one.user_id, one.seq), one.entry_id.split("-")[0]]
            self._acknowledge(keys=[keys.pending, keys.state], args=args)

    def load(
        self,
        *,
        group_id: int,
        rules: Rules,
        stock: Mapping[int, int],
        takers: Mapping[int, int] | None = None,
        seqs: Mapping[int, Iterable[int]] | None = None,
        last_reservation: int = 0,
        epoch: str = "",
        lost_floor: Callable[[int, int], int] | None = None,
        abandoned: Mapping[int, str] | None = None,
    ) -> bool:
        """Load the group's state (built from the database) unless one is there; True when
        loaded. ``PendingReservations`` while reservations wait in the stream (persist them first).

        Arguments:
            takers: each user's takes so far.
            seqs: each user's take numbers in use (a pool's draws' ``seq``); by default 1 to
                the user's takes.
            last_reservation: the group's highest reservation id in the database, numbering
                going on above it.
            epoch: a bucketed item's load of all its states (``inventory.redis_lua.transfers``).
            lost_floor: ``lost_floor(group_id, floor)``, where a counter Redis lost starts (the
                database's ``floor`` given), recorded before it answers (``numbering``); by
                default ``lost_counter_floor``, recorded nowhere (no database row stands for it).
            abandoned: each user's abandoned holds (``abandoned_value``): the database's.
        """
        floor = 0 if not last_reservation else last_reservation - reservation_id(group_id, 1) + 1
        takers = dict(takers or {})
        seqs = {user_id: range(1, takes + 1) for user_id, takes in takers.items()} if seqs is None else seqs
        left = sum(units for units in stock.values() if units > 0)
        args: list = [PERSIST_GROUP, floor, rules_value(rules), rows_value(stock), sum(takers.values()), left, ""]
        for user_id in takers.keys() | seqs.keys():
            if takers.get(user_id) or seqs.get(user_id):
                args += [user_id, marks_value(takers.get(user_id, 0), seqs.get(user_id, ()))]
        args += ["epoch", epoch] if epoch else []
        names = GroupKeys.of(group_id)
        keys = [names.state, names.pending, names.ids, names.takers, names.seqs, names.kick]
        abandoned_load(self.client, group_id, dict(abandoned or {}))  # before RESERVE can read them
        loaded = self._load(keys=keys, args=args)
        if loaded == -2:  # the counter is lost: it starts past all it may have counted
            args[6] = lost_counter_floor(floor) if lost_floor is None else lost_floor(group_id, floor)
            loaded = self._load(keys=keys, args=args)
        if loaded == -1:
            raise PendingReservations(f"group {group_id} has reservations waiting to be persisted")
        return bool(loaded)

    def add_units(self, *, group_id: int, stock_id: int, units: int) -> int | None:
        """Add ``units`` to one row where the state is loaded; the units left after, or None."""
        left = self._add_units(keys=[GroupKeys.of(group_id).state], args=[stock_id, units])
        return None if left is None else int(left)

    def set_rules(self, *, group_id: int, rules: Rules) -> bool:
        """Change the rules of a loaded state; False when none is loaded."""
        return bool(self._set_rules(keys=[(k := GroupKeys.of(group_id)).state, k.pending], args=[rules_value(rules)]))

    def repair(
        self,
        *,
        group_id: int,
        stock: Mapping[int, int],
        takers: Mapping[int, int],
        seqs: Iterable[tuple[int, int]] = (),
        unused: list[tuple[int, int]] | tuple[()] = (),
    ) -> bool:
        """Add ``stock`` units per row and ``takers`` takes per user (either may be negative),
        mark the ``(user, n)`` take numbers in use and drop the ``unused`` ones, where the
        state is loaded; False when none is."""
        keys = GroupKeys.of(group_id)
        args: list = [len(stock), len(takers), len(unused)]
        for stock_id, units in stock.items():
            args += [stock_id, units]
        for user_id, takes in takers.items():
            args += [user_id, takes]
        args += [f"{user_id}:{n}" for user_id, n in unused]
        args += [f"{user_id}:{n}" for user_id, n in seqs]
        return bool(self._repair(keys=[keys.state], args=args))

    def units_return(
        self, *, group_id: int, units: Mapping[int, int], takes_freed: Iterable[int], abandoned: Mapping | None = None
    ) -> bool:
        """Return released records' ``units`` (per stock row), a take to each user of
        ``takes_freed`` (once per take), and set each user's ``abandoned`` holds
        (``abandoned_value``), where the state is loaded; False when none is."""
        keys = GroupKeys.of(group_id)
        abandoned = abandoned or {}
        args: list = [len(units), len(abandoned)]
        for stock_id, count in units.items():
            args += [stock_id, count]
        for user_id, value in abandoned.items():
            args += [user_id, value]
        args += list(takes_freed)
        return bool(self._return(keys=[keys.state, keys.abandoned], args=args))

    def forget(self, *, group_id: int) -> None:
        """Remove every key of the group, its stream, numbering and undone reservations too: a
        stale copy of a group just created, or a sale closed. UNLINK, as DEL of a state of
        100,000 buyers held Redis' one thread, and every live sale, for 25 ms."""
        self.client.unlink(*GroupKeys.of(group_id).all())

    def drop(self, *, group_id: int) -> None:
        """Remove the group's state (RESERVE answers ``unavailable`` from now on), keeping the
        stream, the numbering and the undone reservations: persist the stream after."""
        keys = GroupKeys.of(group_id)
        self._drop(keys=[keys.state, keys.ids, keys.takers, keys.seqs, keys.kick])

    def waiting(self, *, group_id: int) -> int:
        """How many reservations wait in the group's stream."""
        return int(self.client.xlen(GroupKeys.of(group_id).pending))

    def stock(self, *, group_id: int) -> dict[int, int] | None:
        """The units left per row, or None when no state is loaded."""
        return stock_of(self.client.hget(GroupKeys.of(group_id).state, "live"))

    def takers(self, *, group_id: int) -> dict[int, int]:
        """User id -> takes, of the users with any."""
        return takers_of(self.client.hgetall(GroupKeys.of(group_id).state))

    def takes(self, *, group_id: int, user_id: int) -> int:
        """One user's takes (written and pending; an undone one given back): one HGET, 0 with no state."""
        marks = self.client.hget(GroupKeys.of(group_id).state, user_id)
        return 0 if marks is None else marks_of(marks)[0]


class _Reachable:
    """``with REACHABLE:`` says Redis out of reach as the sale's ``Unavailable`` (503): a
    class, not ``contextmanager``, since every ``redis_lua`` take's reserving call runs in it."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, traceback) -> None:
        if isinstance(exc, redis.RedisError | RedisClusterException):
            raise Unavailable("The sale's Redis cannot be reached; try again shortly.") from exc


REACHABLE = _Reachable()

_bound: dict[str, Reservations] = {}


def reservations_client() -> Reservations:
    """The scripts on ``RESERVATIONS_REDIS_URL``, over this process's pool for it (``locks_redis``:
    a plain client that never swallows an error), or its client of the Redis Cluster of the
    URL's nodes (``RESERVATIONS_REDIS_CLUSTER``), with the same timeouts and no retries;
    waiting for ``RESERVATIONS_WAIT_REPLICAS``. Bound once per client."""
    url = settings.RESERVATIONS_REDIS_URL
    if settings.RESERVATIONS_REDIS_CLUSTER:
        client = cluster_redis(url.split(","), **locks_redis_options())
    else:
        client = locks_redis(url)
    replicas, ms = settings.RESERVATIONS_WAIT_REPLICAS, settings.RESERVATIONS_WAIT_MS
    bound = _bound.get(url)
    if bound is None or bound.client is not client or bound.wait != ((replicas, ms) if replicas else None):
        bound = _bound[url] = Reservations(client, wait_replicas=replicas, wait_ms=ms)
    return bound
