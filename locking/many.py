"""All-or-nothing locking of many resources: a buyer and an item, or the 3,000
lines of one wholesale order.

On one Redis server every key is taken by one script, in one round trip: either
all were free and are now held, or none is taken. On Redis Cluster the keys are
grouped by hash slot and the groups taken in slot order, each in one round trip;
a busy group rolls back the groups already taken. Either way a failed attempt
never leaves a partial hold, and waiters retry with jittered back-off capped by
the busy holder's remaining lease.
"""

from __future__ import annotations

import random
import secrets
import time
from collections import defaultdict

from redis import Redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from . import scripts
from .lease import LeasedLock, Released
from .lock import resource_keys
from .watchdog import renewal_client


class MultiLock(LeasedLock):
    """Holds every name in ``names`` under one token, or none of them.

    Args:
        client: a redis-py ``Redis`` (one script for all keys) or ``RedisCluster``
            (one script per hash slot, in slot order, with rollback).
        names: the resources; duplicates are ignored. Interoperates with
            :class:`~locking.Lock` on the same names and ``key_prefix``, including hand-off
            to its waiters.
        key_prefix, **options: as for :class:`~locking.Lock`.
    """

    def __init__(self, client: Redis | RedisCluster, names, *, key_prefix: str = "", **options) -> None:
        self.names = sorted(set(names))
        if not self.names:
            raise ValueError("lock_many needs at least one name")
        super().__init__(label=f"{len(self.names)} locks ({self.names[0]}, ...)", **options)
        self.client = client
        self.keys = [resource_keys(name, key_prefix)[0] for name in self.names]
        self._acquire_script = client.register_script(scripts.ACQUIRE_MANY)
        self._release_script = client.register_script(scripts.RELEASE_MANY)
        self._renew_script = client.register_script(scripts.RENEW_MANY)
        if isinstance(client, RedisCluster):
            groups = defaultdict(list)
            for index, key in enumerate(self.keys):
                groups[key_slot(key.encode())].append(index)
            self._groups = [groups[slot] for slot in sorted(groups)]
        else:
            self._groups = [list(range(len(self.keys)))]
        self.fences: dict[str, int] = {}

    def _group_keys(self, group: list[int]) -> list[str]:
        return [self.keys[i] for i in group] if len(self._groups) > 1 else self.keys

    def _try_once(self, token: str) -> tuple[bool, float]:
        """One all-or-nothing attempt; returns (taken, seconds the busy holder may still hold)."""
        taken_groups: list[list[int]] = []
        fences: dict[str, int] = {}
        for group in self._groups:
            result = self._acquire_script(self._group_keys(group), (token, self.lease_ms))
            if result[0] != 1:
                for done in taken_groups:  # roll back: never a partial hold
                    self._release_group(done, token)
                return False, max(result[2], 0) / 1000
            fences.update(zip([self.names[i] for i in group], result[1:], strict=True))
            taken_groups.append(group)
        self.fences = fences
        return True, 0.0

    def _release_group(self, group: list[int], token: str) -> int:
        return self._release_script(self._group_keys(group), (token,))

    def acquire(self, blocking: bool | None = None, blocking_timeout: float | None = None) -> dict[str, int] | None:
        """Take every lock; return ``{name: fence}``, or None when one stayed busy."""
        if self._nested():
            return self.fences
        blocking, started, deadline = self._wait_plan(blocking, blocking_timeout)
        token = secrets.token_hex(16)
        backoff = 0.001
        contended = False
        while True:
            asked = self.clock()  # a lease taken by this attempt starts after this
            taken, busy_for = self._try_once(token)
            if taken:
                break
            contended = True
            left = None if deadline is None else deadline - self.clock()
            if not blocking or (left is not None and left <= 0):
                self.metrics.refused(self.label, wait=self.clock() - started)
                return None
            pause = random.uniform(0, min(backoff, busy_for or backoff))
            time.sleep(pause if left is None else min(pause, left))
            backoff = min(backoff * 2, 0.05)
        now = self.clock()
        self._took(token, now, lease_ends=asked + self.lease)
        self.metrics.acquired(self.label, wait=now - started, contended=contended)
        return self.fences

    def _renew_in_redis(self, token: str) -> bool:
        renewed = 0
        for group in self._groups:
            renewed += self._renew_script(
                self._group_keys(group), (token, self.lease_ms), client=renewal_client(self.client, self.lease)
            )
        return renewed == len(self.keys)

    def _release_in_redis(self, token: str) -> Released:
        released = sum(self._release_group(group, token) for group in self._groups)
        return Released.RELEASED if released == len(self.keys) else Released.EXPIRED


def lock_many(client: Redis | RedisCluster, names, **options) -> MultiLock:
    """A :class:`MultiLock` over ``names``: ``with lock_many(r, ["user:7", "stock:42"]) as held: ...``."""
    return MultiLock(client, names, **options)
