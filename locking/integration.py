"""The thin Django side of ``locking``: the lock client from settings, a system check,
and fenced writes through the ORM.

Settings: ``LOCK_REDIS_URL`` (one server), ``LOCK_REDIS_URLS`` (Redlock servers).
"""

from __future__ import annotations

import os
import threading

import redis
from django.conf import settings
from django.core.checks import Error, register
from django.db.models import QuerySet
from redis.backoff import NoBackoff
from redis.retry import Retry

from .errors import StaleFence

_clients: dict[str, tuple[int, redis.Redis]] = {}
_clients_guard = threading.Lock()


def lock_client(url: str | None = None) -> redis.Redis:
    """The process's lock connection pool for ``url`` (default ``LOCK_REDIS_URL``).

    A plain redis-py client: unlike a cache client it never swallows an error,
    and it has no socket timeout shorter than a lock wait.
    """
    url = url or settings.LOCK_REDIS_URL
    with _clients_guard:
        pid, client = _clients.get(url, (0, None))
        if client is None or pid != os.getpid():
            client = redis.Redis.from_url(url, socket_connect_timeout=2, health_check_interval=30)
            _clients[url] = (os.getpid(), client)
        return client


def fenced_update(queryset: QuerySet, *, lock, fence_field: str = "fence", **updates) -> int:
    """``UPDATE`` the rows of ``queryset`` only if no newer holder of ``lock`` has written them.

    Sets ``fence_field`` to ``lock.fence`` together with ``updates`` where the stored
    fence is older. Returns the number of rows written; raises StaleFence (and tells
    ``lock.metrics``) when a row exists but carries a fence at least as new: the
    caller had lost its lock. A row that fails the queryset's own conditions is
    simply not written.
    """
    fence = lock.fence
    written = queryset.filter(**{f"{fence_field}__lt": fence}).update(**{fence_field: fence}, **updates)
    if not written and queryset.filter(**{f"{fence_field}__gte": fence}).exists():
        metrics = getattr(lock, "metrics", None)
        if metrics is not None:
            metrics.stale_fence(getattr(lock, "label", ""), fence=fence)
        raise StaleFence(f"fence {fence} is stale for {queryset.model.__name__}")
    return written


@register()
def lock_connection_check(app_configs, **kwargs):
    """The lock server must be a real Redis that answers, reached by a client that raises."""
    errors = []
    for url in [settings.LOCK_REDIS_URL, *getattr(settings, "LOCK_REDIS_URLS", [])]:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            errors.append(Error(f"Lock URL {url!r} is not a redis:// URL.", id="locking.E001"))
            continue
        try:
            probe = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2, retry=Retry(NoBackoff(), 0))
            info = probe.info("server")
        except (redis.RedisError, OSError) as exc:
            errors.append(Error(f"Lock server {url} does not answer: {exc}", id="locking.E002"))
            continue
        if "redis_version" not in info:
            errors.append(Error(f"Lock server {url} is not Redis.", id="locking.E003"))
    return errors
