"""How far the persisting of ``redis_lua`` reservations is behind, read for the metrics."""

from __future__ import annotations

from .client import Reservations
from .values import GroupKeys, Pending


def reservations_backlog(reservations: Reservations, *, group_ids: list[int]) -> tuple[int, float]:
    """How many reservations wait in the groups' streams, and how many seconds the oldest
    of them has waited (0 with none), by Redis' clock, in two round trips (the clock's
    apart: a cluster's pipeline takes no ``TIME``).

    A stream's first entry is its oldest: entry ids are reservation numbers, handed
    out in the order the reservations are made, and entries leave only once written
    or undone.
    """
    now = reservations.client.time()
    pipe = reservations.client.pipeline(transaction=False)
    for group_id in group_ids:
        key = GroupKeys.of(group_id).pending
        pipe.xlen(key)
        pipe.xrange(key, count=1)
    answers = pipe.execute()
    now_ms = now[0] * 1000 + now[1] // 1000
    waiting, oldest_ms = 0, None
    for group_id, length, first in zip(group_ids, answers[::2], answers[1::2], strict=True):
        waiting += int(length)
        if first:
            at_ms = Pending.from_entry(group_id, *first[0]).at_ms
            oldest_ms = at_ms if oldest_ms is None else min(oldest_ms, at_ms)
    return waiting, 0.0 if oldest_ms is None else max(0.0, (now_ms - oldest_ms) / 1000)
