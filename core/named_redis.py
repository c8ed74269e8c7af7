"""Redis clients that a setting names by the dotted path of a factory (``RATE_LIMITS_REDIS_CLIENT``,
``IDEMPOTENCY_REDIS_CLIENT``, ``ADMISSION_REDIS_CLIENT``), so that ``core`` reaches a
project's Redis without importing the package that configures it; and the Lua scripts
registered once per such client."""

from __future__ import annotations

import os

import redis
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string
from redis.commands.core import Script

# Setting name -> the client its factory returned, in this process. A take asks for two or
# three of them (its rate limits, its idempotency key, its waiting room), and each ask read
# two settings through Django's lazy settings object and took the factory's lock: 2.7 us of a
# ticketed take's CPU (``benchmarks.admission_cpu``). Forgotten when any setting changes
# (tests override the factories and the URLs they read) and in a forked child, whose
# factories make clients of their own.
_resolved: dict[str, redis.Redis] = {}
os.register_at_fork(after_in_child=_resolved.clear)


@receiver(setting_changed)
def _forget_resolved(**kwargs) -> None:
    _resolved.clear()


def named_client(setting: str) -> redis.Redis:
    """The client that the factory whose dotted path the setting ``setting`` names returns."""
    client = _resolved.get(setting)
    if client is None:
        client = _resolved[setting] = import_string(getattr(settings, setting))()
    return client


_scripts: dict[tuple[int, str], Script] = {}


def client_script(client: redis.Redis, source: str) -> Script:
    """``source`` registered on ``client``: sent by its SHA, loaded again when the server lost it."""
    script = _scripts.get((id(client), source))
    if script is None:
        script = _scripts[(id(client), source)] = client.register_script(source)
    return script
