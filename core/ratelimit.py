"""Rate limits, atomic in Redis: a counter per limit and window, per item on sale.

A request's counters are those of the item it asks for (a voucher, a pool), under the
item's hash tag ``{group:<stock group>}``: ``<ns>:rate:{group:7}:purchase:user:42`` (``<ns>``
the instance namespace, ``core.namespace``). So they
share a Redis Cluster slot with the item's own keys, and the ``redis_lua`` script that
reserves a unit counts them in its own round trip (``RATE_WAIT`` inside
``inventory.redis_lua.scripts.RESERVE``): the limit costs that strategy nothing more on the
wire. The other strategies count them in one script call (``COUNT``) before they take. A limit
therefore holds per item: a user or an address hammering one sale is refused there, and
one spreading over several sales meets each one's limit.

A fixed window per counter: simple, one key each, and a burst of at most twice the limit
across a window's edge, which is enough to keep a script from hammering a sale.

The counters live in the Redis of the client that ``RATE_LIMITS_REDIS_CLIENT`` names (the
settings choose the locks' own, ``locking.integration.locks_redis``): core imports no
package of the project, and the settings, which know them all, wire it.
"""

from __future__ import annotations

import ipaddress
import logging
import math
from dataclasses import dataclass
from functools import lru_cache

import redis
from django.conf import settings

from .errors import DomainError
from .named_redis import client_script, named_client
from .namespace import key_prefix

logger = logging.getLogger(__name__)

# Count one hit on every counter from KEYS[first_key] on, and say how long until the
# latest-resetting one that is over its limit resets: 0 when every counter is within its
# limit, else the ms to wait. Each counter's limit and window (ms) are in ARGV, in pairs
# from ARGV[first_arg] on, in the counters' order. Shared by COUNT and by the scripts that
# count in their own round trip, so written for RESERVE's cost (inventory.redis_lua.scripts):
# the window goes to PEXPIRE as the text it came as (a Lua number would be formatted as a
# float).
RATE_WAIT = """
local function rate_wait(first_key, first_arg)
    local wait = 0
    for i = first_key, #KEYS do
        local at = first_arg + 2 * (i - first_key)
        local window = ARGV[at + 1]
        local count = redis.call('INCR', KEYS[i])
        if count == 1 then redis.call('PEXPIRE', KEYS[i], window) end
        if count > ARGV[at] + 0 then
            local ttl = redis.call('PTTL', KEYS[i])
            if ttl < 0 then
                redis.call('PEXPIRE', KEYS[i], window)
                ttl = window + 0
            end
            if ttl > wait then wait = ttl end
        end
    end
    return wait
end
"""

# KEYS: one counter per limit, ARGV: for each, its limit and its window in ms.
# Returns 0 when every counter is within its limit, else the ms to wait.
COUNT = RATE_WAIT + "return rate_wait(1, 1)\n"


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


@dataclass(frozen=True)
class RateCount:
    """What one request counts against its action's limits (``RATE_LIMITS[action]``): the
    scopes it has a value for, on the item it asks for."""

    action: str
    counted: tuple[tuple[Limit, str], ...]

    def keys(self, *, tag: str) -> list[str]:
        """The counters, under the item's hash ``tag`` (``{group:<id>}``)."""
        prefix = key_prefix()
        return [f"{prefix}rate:{tag}:{self.action}:{limit.scope}:{value}" for limit, value in self.counted]

    def args(self) -> list[int]:
        """Each counter's limit and window in ms, in the counters' order (``RATE_WAIT``)."""
        return [number for limit, _ in self.counted for number in (limit.count, int(limit.seconds * 1000))]

    def count(self, *, tag: str) -> None:
        """Count the hit in one round trip; raise ``RateLimited`` when over a limit. Redis out
        of reach lets the request through, with a warning: a limit guards against abuse, not
        the stock, which every strategy guards on its own."""
        script = client_script(rate_client(), COUNT)
        try:
            wait_ms = int(script(keys=self.keys(tag=tag), args=self.args()))
        except redis.RedisError:
            logger.warning("rate limits not counted: Redis cannot be reached", exc_info=True)
            return
        rate_refuse(wait_ms)


def rate_client() -> redis.Redis:
    """The client the counters are counted in: what ``RATE_LIMITS_REDIS_CLIENT`` returns."""
    return named_client("RATE_LIMITS_REDIS_CLIENT")


def rate_count(*, action: str, user_id: int | None = None, address: str | None = None) -> RateCount | None:
    """What a request by ``user_id`` from ``address`` counts against ``action``'s limits, to
    be counted on the item it asks for (``RateCount.count``, or the ``redis_lua`` script's
    own round trip); None while ``RATE_LIMITS_ENABLED`` is off (the load tests: their crowd
    comes from one address) or when no limit applies."""
    if not settings.RATE_LIMITS_ENABLED:
        return None
    values = {"user": user_id, "address": address}
    counted = tuple(
        (Limit(scope, *rule), str(values[scope]))
        for scope, rule in settings.RATE_LIMITS.get(action, {}).items()
        if values.get(scope) not in (None, "")
    )
    return RateCount(action=action, counted=counted) if counted else None


def rate_refuse(wait_ms: int) -> None:
    """Raise ``RateLimited`` (429, ``Retry-After`` in whole seconds) when ``wait_ms`` > 0."""
    if wait_ms > 0:
        raise RateLimited(retry_after=max(1, math.ceil(wait_ms / 1000)))


def client_address(request) -> str:
    """The caller's address: the peer's (``REMOTE_ADDR``), unless the peer is one of
    ``TRUSTED_PROXIES``; then the address that proxy put in ``X-Forwarded-For``.

    The header is read from the right: each trusted proxy appends the address it saw, so
    the entry left of the last trusted one is the client; whatever stands further left was
    written by the client and is never believed. A header sent by anyone else, straight to
    gunicorn, is ignored. What comes back is always a plain address (IPv4-mapped written as
    IPv4), never text of the request's own: it is part of Redis keys."""
    peer = request.META.get("REMOTE_ADDR", "")
    address = _address(peer)
    if not _trusted(address):
        return peer if address is None else str(address)
    proxies = _trusted_proxies(tuple(settings.TRUSTED_PROXIES))
    for hop in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        told = _address(_without_port(hop.strip()))
        if told is None:
            break  # not an address: the proxy that passed it on is as far as we know
        address = told
        if not _within(address, proxies):
            break
    return str(address)


# How much of an IPv6 address one client is counted by: a /64 is one site's, a host's
# interface picks its own address within it at will (RFC 4941), so counted whole, every
# host of IPv6 had as many addresses, and as many budgets, as it liked.
IPV6_COUNTED_PREFIX = 64


def client_counted(request) -> str:
    """The caller as the rate limits and the login throttle count it: its address
    (:func:`client_address`), an IPv6 one by its /64 (``2001:db8:1:2::/64``)."""
    address = client_address(request)
    parsed = _address(address)
    if parsed is None or parsed.version == 4:
        return address
    return str(ipaddress.ip_network(f"{parsed}/{IPV6_COUNTED_PREFIX}", strict=False))


@lru_cache(maxsize=4)
def _trusted_proxies(networks: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(network, strict=False) for network in networks)


def peer_is_trusted_proxy(request) -> bool:
    """Whether the request came straight from one of ``TRUSTED_PROXIES``: only then is what it
    says of the client (its address, its scheme) believed."""
    return _trusted(_address(request.META.get("REMOTE_ADDR", "")))


def _trusted(address) -> bool:
    proxies = _trusted_proxies(tuple(settings.TRUSTED_PROXIES))
    return address is not None and bool(proxies) and _within(address, proxies)


def _without_port(hop: str) -> str:
    """An ``X-Forwarded-For`` entry without the port some proxies add (``1.2.3.4:555``,
    ``[2001:db8::1]:555``): read as no address, every client behind such a proxy was counted
    as the proxy itself, one budget for all."""
    if hop.startswith("["):
        return hop[1:].split("]", 1)[0]
    host, colon, port = hop.rpartition(":")
    return host if colon and "." in host and ":" not in host and port.isdigit() else hop


def _address(text: str):
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    return getattr(address, "ipv4_mapped", None) or address


def _within(address, networks) -> bool:
    return any(address.version == network.version and address in network for network in networks)
