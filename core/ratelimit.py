"""Rate limits, atomic in Redis: each limit a counter per window, every limit of a request
counted in one script call (one round trip).

A fixed window per counter: simple, one key each, and a burst of at most twice the limit
across a window's edge, which is enough to keep a script from hammering a sale or a login.
Keys are ``rate:<action>:<scope>:<value>``, for instance ``rate:purchase:user:42``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import redis
from django.conf import settings

from locking.integration import lock_client

from .errors import DomainError

logger = logging.getLogger(__name__)

# Count one hit on every counter, and say how long until the latest-resetting one that is
# over its limit resets.
# KEYS: one counter per limit
# ARGV: for each key in order, its limit and its window in ms
# Returns 0 when every counter is within its limit, else the ms to wait.
COUNT = """
local wait = 0
for i, key in ipairs(KEYS) do
    local limit, window = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
    local count = redis.call('INCR', key)
    if count == 1 then redis.call('PEXPIRE', key, window) end
    if count > limit then
        local ttl = redis.call('PTTL', key)
        if ttl < 0 then
            redis.call('PEXPIRE', key, window)
            ttl = window
        end
        if ttl > wait then wait = ttl end
    end
end
return wait
"""


class RateLimited(DomainError):
    """Too many requests of this kind from this user or address; nothing was done."""

    code = "rate_limited"
    status = 429
    default_message = "Too many requests; try again shortly."

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"Too many requests; try again in {retry_after} s.")
        self.retry_after = retry_after


@dataclass(frozen=True)
class Limit:
    """At most ``count`` hits per ``seconds`` for one scope (``user`` or ``address``)."""

    scope: str
    count: int
    seconds: float


_scripts: dict[int, object] = {}


def rate_limit(*, action: str, user_id: int | None = None, address: str | None = None) -> None:
    """Count one ``action`` for the user and the address; raise ``RateLimited`` (429, with
    ``Retry-After``) when either went over its limit (``RATE_LIMITS[action]``).

    Nothing is counted while ``RATE_LIMITS_ENABLED`` is off (the load tests: their crowd
    comes from one address). Redis out of reach lets the request through, with a warning:
    a limit guards against abuse, not the stock, which every strategy guards on its own.
    """
    if not settings.RATE_LIMITS_ENABLED:
        return
    values = {"user": user_id, "address": address}
    limits = [Limit(scope, *rule) for scope, rule in settings.RATE_LIMITS.get(action, {}).items()]
    keys, args = [], []
    for limit in limits:
        if values.get(limit.scope) is None:
            continue
        keys.append(f"rate:{action}:{limit.scope}:{values[limit.scope]}")
        args += [limit.count, int(limit.seconds * 1000)]
    if not keys:
        return
    client = lock_client()
    script = _scripts.get(id(client))
    if script is None:
        script = _scripts[id(client)] = client.register_script(COUNT)
    try:
        wait_ms = int(script(keys=keys, args=args))
    except redis.RedisError:
        logger.warning("rate limits not counted: Redis cannot be reached", exc_info=True)
        return
    if wait_ms > 0:
        raise RateLimited(retry_after=max(1, math.ceil(wait_ms / 1000)))


def client_address(request) -> str:
    """The caller's address as the server saw it (behind a proxy: set the proxy to pass
    the client's own as ``REMOTE_ADDR``, e.g. gunicorn's ``--forwarded-allow-ips``)."""
    return request.META.get("REMOTE_ADDR", "")
