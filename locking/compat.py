"""A drop-in for ``redis.lock.Lock``: same constructor, methods, exceptions, key layout.

The key is ``name`` itself and holds the owner's token; ``timeout=None`` means the
key never expires; a busy lock is retried every ``sleep`` seconds. Use it as
``client.lock(name, lock_class=Lock)`` or behind django-redis ``cache.lock()``.

One difference that changes no documented behaviour: tokens are 128 random bits
rather than a time-based UUID, which leaks the host and the time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from types import SimpleNamespace, TracebackType

import redis as _redis
from redis.exceptions import LockError, LockNotOwnedError

logger = logging.getLogger(__name__)

# KEYS[1] lock name; ARGV[1] token. Returns 1 when the key held the token and is deleted, else 0.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS[1] lock name; ARGV[1] token, ARGV[2] milliseconds, ARGV[3] "1" to replace the
# remaining time with ARGV[2], "0" to add ARGV[2] to it.
# Returns 1 when extended, 0 when the key does not hold the token or has no expiry.
EXTEND = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
local remaining = redis.call('PTTL', KEYS[1])
if remaining < 0 then
    return 0
end
if ARGV[3] == '1' then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
    redis.call('PEXPIRE', KEYS[1], remaining + tonumber(ARGV[2]))
end
return 1
"""

# KEYS[1] lock name; ARGV[1] token, ARGV[2] milliseconds.
# Returns 1 when the key held the token and its time was reset to ARGV[2], else 0.
REACQUIRE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
end
return 0
"""


class Lock:
    """A shared, distributed lock with the interface and semantics of ``redis.lock.Lock``.

    Args:
        redis: the redis-py client.
        name: the key of the lock.
        timeout: the lock's maximum life in seconds (int or float); None: no expiry.
        sleep: seconds between attempts while another owner holds the lock.
        blocking: whether ``acquire`` waits (the default) or returns False at once.
        blocking_timeout: seconds to keep trying at most; None: for ever.
        thread_local: keep the token per thread (the default), so that a thread
            never releases a lock another thread acquired through the same object.
        raise_on_release_error: raise from ``__exit__`` when the lock was no longer
            owned; when False, log a warning instead.
    """

    lua_release = None
    lua_extend = None
    lua_reacquire = None
    LUA_RELEASE_SCRIPT = RELEASE
    LUA_EXTEND_SCRIPT = EXTEND
    LUA_REACQUIRE_SCRIPT = REACQUIRE

    def __init__(
        self,
        redis,
        name: str,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
    ) -> None:
        self.redis = redis
        self.name = name
        self.timeout = timeout
        self.sleep = sleep
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.thread_local = bool(thread_local)
        self.raise_on_release_error = raise_on_release_error
        self.local = threading.local() if self.thread_local else SimpleNamespace()
        self.local.token = None
        self.register_scripts()

    def register_scripts(self) -> None:
        cls = type(self)
        if cls.lua_release is None:
            cls.lua_release = self.redis.register_script(cls.LUA_RELEASE_SCRIPT)
        if cls.lua_extend is None:
            cls.lua_extend = self.redis.register_script(cls.LUA_EXTEND_SCRIPT)
        if cls.lua_reacquire is None:
            cls.lua_reacquire = self.redis.register_script(cls.LUA_REACQUIRE_SCRIPT)

    def __enter__(self) -> Lock:
        if self.acquire():
            return self
        raise LockError("Unable to acquire lock within the time specified", lock_name=self.name)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self.release()
        except LockError:
            if self.raise_on_release_error:
                raise
            logger.warning("Lock was unlocked or no longer owned when exiting context manager.")

    def acquire(
        self,
        sleep: float | None = None,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: str | bytes | None = None,
    ) -> bool:
        """Take the lock; True once held. False when not blocking, or when ``blocking_timeout`` ran out."""
        sleep = self.sleep if sleep is None else sleep
        blocking = self.blocking if blocking is None else blocking
        blocking_timeout = self.blocking_timeout if blocking_timeout is None else blocking_timeout
        token = os.urandom(16).hex().encode() if token is None else self.redis.get_encoder().encode(token)
        give_up_at = None if blocking_timeout is None else time.monotonic() + blocking_timeout
        while True:
            if self.do_acquire(token):
                self.local.token = token
                return True
            if not blocking:
                return False
            if give_up_at is not None and time.monotonic() + sleep > give_up_at:
                return False
            time.sleep(sleep)

    def do_acquire(self, token: bytes) -> bool:
        expiry_ms = int(self.timeout * 1000) if self.timeout else None
        return bool(self.redis.set(self.name, token, nx=True, px=expiry_ms))

    def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return self.redis.get(self.name) is not None

    def owned(self) -> bool:
        """Whether this object (in this thread, when thread-local) holds the lock."""
        token = self.local.token
        if token is None:
            return False
        stored = self.redis.get(self.name)
        if isinstance(stored, str):
            stored = self.redis.get_encoder().encode(stored)
        return stored == token

    def release(self) -> None:
        """Release the lock; LockError if not held, LockNotOwnedError if it had expired."""
        token = self.local.token
        if token is None:
            raise LockError("Cannot release a lock that's not owned or is already unlocked.", lock_name=self.name)
        self.local.token = None
        self.do_release(token)

    def do_release(self, expected_token: bytes) -> None:
        if not self.lua_release(keys=[self.name], args=[expected_token], client=self.redis):
            raise LockNotOwnedError("Cannot release a lock that's no longer owned", lock_name=self.name)

    def extend(self, additional_time: float, replace_ttl: bool = False) -> bool:
        """Add ``additional_time`` seconds to the remaining time (or replace it with ``replace_ttl``)."""
        if self.local.token is None:
            raise LockError("Cannot extend an unlocked lock", lock_name=self.name)
        if self.timeout is None:
            raise LockError("Cannot extend a lock with no timeout", lock_name=self.name)
        return self.do_extend(additional_time, replace_ttl)

    def do_extend(self, additional_time: float, replace_ttl: bool) -> bool:
        args = [self.local.token, int(additional_time * 1000), "1" if replace_ttl else "0"]
        if not self.lua_extend(keys=[self.name], args=args, client=self.redis):
            raise LockNotOwnedError("Cannot extend a lock that's no longer owned", lock_name=self.name)
        return True

    def reacquire(self) -> bool:
        """Reset the remaining time to ``timeout``."""
        if self.local.token is None:
            raise LockError("Cannot reacquire an unlocked lock", lock_name=self.name)
        if self.timeout is None:
            raise LockError("Cannot reacquire a lock with no timeout", lock_name=self.name)
        return self.do_reacquire()

    def do_reacquire(self) -> bool:
        args = [self.local.token, int(self.timeout * 1000)]
        if not self.lua_reacquire(keys=[self.name], args=args, client=self.redis):
            raise LockNotOwnedError("Cannot reacquire a lock that's no longer owned", lock_name=self.name)
        return True


class Redis(_redis.Redis):
    """A redis-py client whose ``lock()`` makes this module's :class:`Lock`.

    django-redis builds its client from ``OPTIONS["REDIS_CLIENT_CLASS"]`` and calls
    ``client.lock()`` without a ``lock_class``; pointing that option here puts this
    lock behind ``cache.lock()``.
    """

    def lock(self, name, *args, lock_class=None, **kwargs):
        return super().lock(name, *args, lock_class=lock_class or Lock, **kwargs)
