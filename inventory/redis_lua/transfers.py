"""Units moved between the states of a bucketed ``redis_lua`` item: a buyer's home state
borrowing from the others once it is empty, the rebalancer filling empty states while the
sale runs, and the recovery that finishes a move stopped half-way.

A move is three steps in three slots (``inventory.redis_lua.transfer_scripts``): TRANSFER_OUT
in the giver (units from its rows into its outbox), TRANSFER_IN in the receiver (once per
transfer id; refused for another epoch, a missing state or a stale transfer, and every such
refusal is final), then the outbox entry dropped, or TRANSFER_CANCEL in the giver after a
refusal. Whoever finds an outbox entry can finish it the same way (``recover``): IN again
is harmless, and CANCEL follows only a refusal, after which no IN can ever apply it, so a
unit is neither lost nor counted twice, whichever process dies where.

The states of an item are given as a list of state ids, bucket by bucket
(``values.state_id``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import redis
from redis.cluster import RedisCluster

from core.redis_cluster import server_of

from . import transfer_scripts
from .values import GroupKeys, live_of, text_of

# The longest a transfer may take from OUT to IN (ms, by the two masters' clocks): IN refuses
# an older one, so that its applied mark can be pruned once twice as old.
MOST_TRANSIT_MS = 30_000
# How many units a borrower takes at once: enough that the next buyers of its home find
# some, few enough to leave the giver's own buyers theirs (OUT also gives at most half).
BORROW_UNITS = 8


class Borrowed(Enum):
    """What ``Transfers.borrow`` found."""

    HOME = "home"  # the home state has units
    SOLD_OUT = "sold_out"  # two reads in a row found none anywhere
    MISSING = "missing"  # a state is missing
    BUSY = "busy"  # every read saw units, which others took first


@dataclass(frozen=True)
class Units:
    """What one read of a state found: its units left in ``live`` and those in its outbox
    (leaving it, possibly already applied in their receiver: counted on both sides until
    the entry is dropped, never on neither); ``left`` is None for no state."""

    left: int | None
    outbox: int


def _entry(value) -> tuple[int, str, int, int, str]:
    receiver, epoch, at_ms, units, rows = (text_of(value).split(" ") + [""])[:5]
    return int(receiver), epoch, int(at_ms), int(units), rows


class Transfers:
    """The transfer scripts bound to one Redis client (plain or Cluster)."""

    def __init__(self, client: redis.Redis | RedisCluster) -> None:
        self.client = client
        self._out = client.register_script(transfer_scripts.TRANSFER_OUT)
        self._in = client.register_script(transfer_scripts.TRANSFER_IN)
        self._cancel = client.register_script(transfer_scripts.TRANSFER_CANCEL)

    def out(self, *, giver: int, receiver: int, most: int, tid: str | None = None) -> tuple[str, str] | None:
        """TRANSFER_OUT: the transfer's id and OUT's answer, or None when the giver had nothing
        to give."""
        tid = tid or f"{giver}:{uuid.uuid4().hex}"
        keys = GroupKeys.of(giver)
        said = text_of(self._out(keys=[keys.state, keys.outbox], args=[tid, receiver, most]))
        return None if said == "none" else (tid, said)

    def into(self, *, receiver: int, tid: str, epoch: str, at_ms: int, rows: str) -> str:
        """TRANSFER_IN: "applied", or the final refusal ("unavailable", "epoch", "stale")."""
        keys = GroupKeys.of(receiver)
        args = [tid, epoch, at_ms, MOST_TRANSIT_MS, rows]
        return text_of(self._in(keys=[keys.state, keys.applied], args=args))

    def cancel(self, *, giver: int, tid: str) -> bool:
        """TRANSFER_CANCEL: call only after a refused IN."""
        keys = GroupKeys.of(giver)
        return bool(self._cancel(keys=[keys.state, keys.outbox], args=[tid]))

    def finish(self, *, giver: int, tid: str, receiver: int, epoch: str, at_ms: int, rows: str) -> int:
        """IN, then the outbox entry dropped, or CANCEL after a refusal: the units that
        arrived (0 when cancelled)."""
        if self.into(receiver=receiver, tid=tid, epoch=epoch, at_ms=at_ms, rows=rows) == "applied":
            self.client.hdel(GroupKeys.of(giver).outbox, tid)
            return sum(int(pair.split(":")[1]) for pair in rows.split(",") if pair)
        self.cancel(giver=giver, tid=tid)
        return 0

    def move(self, *, giver: int, receiver: int, most: int) -> int:
        """Move up to ``most`` units from ``giver`` to ``receiver``: how many arrived."""
        made = self.out(giver=giver, receiver=receiver, most=most)
        if made is None:
            return 0
        tid, said = made
        _, epoch, at_ms, _, rows = said.split(" ")
        return self.finish(giver=giver, tid=tid, receiver=receiver, epoch=epoch, at_ms=int(at_ms), rows=rows)

    def units(self, states: Sequence[int]) -> list[Units]:
        """Each state's units, ``live`` read before the outbox in one transaction per slot:
        within a state a unit OUT moves is seen in one place or both, never in neither."""
        found = []
        for state in states:
            keys = GroupKeys.of(state)
            pipe = server_of(self.client, keys.state).pipeline(transaction=True)
            pipe.hget(keys.state, "live")
            pipe.hvals(keys.outbox)
            live, outbox = pipe.execute()
            read = live_of(live)
            left = None if read is None else sum(units for units in read[1].values() if units > 0)
            found.append(Units(left=left, outbox=sum(_entry(value)[3] for value in outbox)))
        return found

    def borrow(self, *, states: Sequence[int], home: int, most: int = BORROW_UNITS, rounds: int = 20) -> Borrowed:
        """Bring units into the ``home``-th state from the next one round from it that has
        some: ``HOME`` once the home state has units (moved, or arrived meanwhile),
        ``SOLD_OUT`` when two reads in a row found no units anywhere, neither left nor in
        transit, ``MISSING`` when a state is missing (its units unknown: not sold out, the
        item's states need a rebuild), ``BUSY`` when ``rounds`` reads each saw units that
        others took first (not sold out: the caller answers busy). Units found only in
        transit are finished here (``recover``) rather than waited for: their mover may be
        dead."""
        empty_reads = 0
        for _ in range(rounds):
            found = self.units(states)
            if any(one.left is None for one in found):
                return Borrowed.MISSING
            if (found[home].left or 0) > 0:
                return Borrowed.HOME
            givers = [
                (home + step) % len(states)
                for step in range(1, len(states))
                if (found[(home + step) % len(states)].left or 0) > 0
            ]
            for giver in givers:
                if self.move(giver=states[giver], receiver=states[home], most=most):
                    return Borrowed.HOME
            if givers or any(one.outbox for one in found):
                empty_reads = 0
                if not givers:
                    self.recover(states)
                continue
            empty_reads += 1
            if empty_reads == 2:
                return Borrowed.SOLD_OUT
        return Borrowed.BUSY

    def recover(self, states: Sequence[int], *, prune_after_ms: int = 2 * MOST_TRANSIT_MS) -> int:
        """Finish every transfer left in the states' outboxes (IN again, or CANCEL after a
        refusal), and prune applied marks sent more than ``prune_after_ms`` ago whose outbox
        entry is gone (no IN of theirs can apply any more: it would be stale): how many
        transfers were finished. A mark's age is the receiver's own clock less the giver's
        time of sending, as IN measures staleness: the masters' clocks may differ, and a
        mark pruned by another clock while IN would still apply its transfer could let a
        stalled recovery apply it twice."""
        finished = 0
        for giver in states:
            for tid, value in self.client.hgetall(GroupKeys.of(giver).outbox).items():
                receiver, epoch, at_ms, _, rows = _entry(value)
                self.finish(giver=giver, tid=text_of(tid), receiver=receiver, epoch=epoch, at_ms=at_ms, rows=rows)
                finished += 1
        for receiver in states:
            applied = GroupKeys.of(receiver).applied
            node = server_of(self.client, applied)
            now_s, now_us = node.time()
            now_ms = now_s * 1000 + now_us // 1000
            for tid, mark in node.hgetall(applied).items():
                tid = text_of(tid)
                # "applied <ms> <sent ms>"; a mark written before the sending time was kept
                # has the receiver's time of IN alone.
                if now_ms - int(text_of(mark).split(" ")[-1]) < prune_after_ms:
                    continue
                if not self.client.hexists(GroupKeys.of(int(tid.split(":")[0])).outbox, tid):
                    self.client.hdel(applied, tid)
        return finished

    def rebalance(self, states: Sequence[int], *, most: int = 64) -> int:
        """Move units from the fullest states to those below a quarter of the mean (empty
        ones first), so that most buyers find units at home: how many units moved."""
        found = [one.left or 0 for one in self.units(states)]
        mean = sum(found) / len(states)
        moved = 0
        for receiver in sorted(range(len(states)), key=lambda at: found[at]):
            if found[receiver] >= max(1, mean / 4):
                break
            giver = max(range(len(states)), key=lambda at: found[at])
            if found[giver] < 2 or giver == receiver:
                break
            want = min(most, int(mean) - found[receiver], found[giver] // 2) or 1
            arrived = self.move(giver=states[giver], receiver=states[receiver], most=want)
            found[giver] -= arrived
            found[receiver] += arrived
            moved += arrived
        return moved


_bound: dict[int, Transfers] = {}


def transfers_client(reservations) -> Transfers:
    """The transfer scripts on the client of ``reservations`` (``client.reservations_client``),
    bound once per client."""
    bound = _bound.get(id(reservations.client))
    if bound is None or bound.client is not reservations.client:
        bound = _bound[id(reservations.client)] = Transfers(reservations.client)
    return bound
