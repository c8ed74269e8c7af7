"""The lock library's exceptions. All derive from :class:`LockError`."""

from redis.exceptions import LockError as RedisLockError


class LockError(RedisLockError):
    """Base of every error this library raises (and a redis-py ``LockError``)."""


class LockNotOwned(LockError):
    """The caller does not hold the lock: never acquired it, or it is the parent's lock in a forked child."""


class LockLost(LockError):
    """The lease was lost while the lock was held: the critical section may not have been exclusive."""


class LockTimeout(LockError):
    """The lock could not be acquired within ``blocking_timeout`` (or at once, when not blocking)."""


class StaleFence(LockError):
    """A write carried a fence older than one already applied: its holder had lost the lock."""
