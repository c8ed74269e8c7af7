"""The exclusive side of a read-write lock: one holder, when no shared holder holds; while
it waits, no new shared holding is taken (``locking.readwrite`` describes the pair).

Usage::

    with ExclusiveLock(redis_client, "reservations:42", blocking_timeout=30):
        rebuild()               # every drain of the group has left, and none starts
"""

from __future__ import annotations

from redis import Redis

from . import scripts
from .lease import Released
from .readwrite import WAITING_FLAG_MS, ReadWriteSide
from .watchdog import renewal_client


class ExclusiveLock(ReadWriteSide):
    """The one holder of a resource, excluding its :class:`~locking.shared.SharedLock`
    holders. Arguments as for :class:`~locking.readwrite.ReadWriteSide`."""

    def __init__(self, client: Redis, name: str, *, key_prefix: str = "", **options) -> None:
        super().__init__(client, name, key_prefix=key_prefix, **options)
        self._acquire_script = client.register_script(scripts.EXCLUSIVE_ACQUIRE)
        self._renew_script = client.register_script(scripts.RENEW)
        self._release_script = client.register_script(scripts.EXCLUSIVE_RELEASE)

    def _attempt(self, token: str, *, waiting: bool) -> tuple[int, int]:
        keys = (self.exclusive_key, self.shared_key, self.waiting_key, self.fence_key)
        flag = WAITING_FLAG_MS if waiting else ""  # a fail-fast caller holds back nobody
        taken, value = self._acquire_script(keys, (token, self.lease_ms, flag))
        return (int(value), 0) if taken else (0, int(value))

    def _give_up(self, token: str) -> None:
        self._release_script((self.exclusive_key, self.waiting_key), (token,))

    def locked(self) -> bool:
        """Whether an exclusive holder holds the resource now."""
        return bool(self.client.exists(self.exclusive_key))

    def _renew_in_redis(self, token: str) -> bool:
        keys = (self.exclusive_key,)
        return bool(self._renew_script(keys, (token, self.lease_ms), client=renewal_client(self.client, self.lease)))

    def _release_in_redis(self, token: str) -> Released:
        released = self._release_script((self.exclusive_key, self.waiting_key), (token,))
        return Released.RELEASED if released else Released.EXPIRED
