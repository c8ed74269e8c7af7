"""Redis out of reach, said as the sale's ``Unavailable`` (503), around every call a take or
a read of ``redis_lua``'s state makes to the reservations' Redis."""

from __future__ import annotations

import redis
from redis.exceptions import RedisClusterException

from core.errors import Unavailable


class _Reachable:
    """``with REACHABLE:`` says Redis out of reach as the sale's ``Unavailable`` (503): a
    class, not ``contextmanager``, since every ``redis_lua`` take's reserving call runs in it."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, traceback) -> None:
        if isinstance(exc, redis.RedisError | RedisClusterException):
            raise Unavailable("The sale's Redis cannot be reached; try again shortly.") from exc


REACHABLE = _Reachable()
