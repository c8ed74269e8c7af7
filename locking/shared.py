"""The shared side of a read-write lock: up to ``limit`` holders at once, none while an
exclusive holder holds or waits (``locking.readwrite`` describes the pair).

Usage::

    drain = SharedLock(redis_client, "reservations:42", limit=4)
    with drain:                 # one of up to 4 at once; none while a rebuild holds or waits
        persist_a_batch()
"""

from __future__ import annotations

from redis import Redis

from . import scripts
from .lease import Released
from .readwrite import ReadWriteSide
from .watchdog import renewal_client


class SharedLock(ReadWriteSide):
    """One of up to ``limit`` holders of a resource at once, excluded by its
    :class:`~locking.exclusive.ExclusiveLock`.

    Args:
        limit: the most shared holders at once (1 or more); a caller beyond it waits (or is
            refused, fail-fast) as it would for an exclusive holder.
        client, name, key_prefix, **options: as for :class:`~locking.readwrite.ReadWriteSide`.
    """

    def __init__(self, client: Redis, name: str, *, limit: int, key_prefix: str = "", **options) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        super().__init__(client, name, key_prefix=key_prefix, **options)
        self.limit = limit
        self._acquire_script = client.register_script(scripts.SHARED_ACQUIRE)
        self._renew_script = client.register_script(scripts.SHARED_RENEW)
        self._release_script = client.register_script(scripts.SHARED_RELEASE)
        self._count_script = client.register_script(scripts.SHARED_COUNT)

    def _attempt(self, token: str, *, waiting: bool) -> tuple[int, int]:
        keys = (self.exclusive_key, self.shared_key, self.waiting_key, self.fence_key)
        taken, value = self._acquire_script(keys, (token, self.lease_ms, self.limit))
        return (int(value), 0) if taken else (0, int(value))

    def holders(self) -> tuple[int, bool]:
        """How many shared holders hold now (this one included), and whether an exclusive
        caller holds or waits: one round trip, nothing written."""
        count, exclusive = self._count_script((self.shared_key, self.exclusive_key, self.waiting_key))
        return int(count), bool(exclusive)

    def _renew_in_redis(self, token: str) -> bool:
        return bool(
            self._renew_script(
                (self.shared_key,), (token, self.lease_ms), client=renewal_client(self.client, self.lease)
            )
        )

    def _release_in_redis(self, token: str) -> Released:
        return Released.RELEASED if self._release_script((self.shared_key,), (token,)) else Released.EXPIRED
