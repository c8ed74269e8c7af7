"""Redis clients that a setting names by the dotted path of a factory (``RATE_LIMITS_REDIS_CLIENT``,
``IDEMPOTENCY_REDIS_CLIENT``), so that ``core`` reaches a project's Redis without importing
the package that configures it; and the Lua scripts registered once per such client."""

from __future__ import annotations

from functools import lru_cache

import redis
from django.utils.module_loading import import_string
from redis.commands.core import Script


@lru_cache(maxsize=8)
def _factory(path: str):
    return import_string(path)


def named_client(path: str) -> redis.Redis:
    """The client that the factory at ``path`` returns (each factory keeps its own)."""
    return _factory(path)()


_scripts: dict[tuple[int, str], Script] = {}


def client_script(client: redis.Redis, source: str) -> Script:
    """``source`` registered on ``client``: sent by its SHA, loaded again when the server lost it."""
    script = _scripts.get((id(client), source))
    if script is None:
        script = _scripts[(id(client), source)] = client.register_script(source)
    return script
