"""The same locks, each held by a majority of the servers in ``LOCK_REDIS_URLS``.

Everything but the lock is ``redis_lock``'s (``redis_lock.py``): the user's lock as the
guard, the group's lock for the write, the fenced conditional decrement. Each lock here
is a ``locking.redlock.Redlock`` over one client per server, held once a majority of
them grant it; with no server configured, its items answer 503.
"""

from __future__ import annotations

import logging

from django.conf import settings

from core.namespace import key_prefix
from locking.integration import redlock_redis
from locking.lease import LeasedLock
from locking.redlock import Redlock

from ..errors import RedlockUnconfigured
from ..models import Strategy
from .redis_lock import RedisLockStrategy

_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """A misconfiguration, said once per process rather than once per request."""
    if message not in _warned:
        _warned.add(message)
        logging.getLogger(__name__).warning(message)


class RedlockStrategy(RedisLockStrategy):
    name = Strategy.REDLOCK

    def _lock(self, name: str, **options) -> LeasedLock:
        if not settings.LOCK_REDIS_URLS:
            _warn_once("redlock: LOCK_REDIS_URLS names no Redis servers; its items answer 503 until it does")
            raise RedlockUnconfigured()
        clients = [redlock_redis(url) for url in settings.LOCK_REDIS_URLS]
        return Redlock(clients, name, key_prefix=key_prefix(), lease=settings.LOCK_LEASE_SECONDS, **options)

    def _user_lock(self, name: str) -> LeasedLock:
        # Redlock counts a fence on every server whatever its use: its user lock keeps one
        # counter per buyer on each (docs/design.md, "Strategies").
        return self._lock(name, blocking=False)
