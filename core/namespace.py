"""The instance namespace: every Redis key this instance writes starts with
``<INSTANCE_NAMESPACE>:`` (``instance_key``), so that instances with different databases
can share one Redis (settings: ``INSTANCE_NAMESPACE``, by default derived from the database).

The prefix goes before any hash tag (``<ns>:res:{group:7}:state``, ``<ns>:lock:{stock-group:7}``),
so every key of one item stays in its item's Cluster slot. The Django cache
(``KEY_PREFIX``) and the Celery broker (``global_keyprefix``) take the same prefix in the
settings. ``redis-cli --scan --pattern '<ns>:*'`` lists one instance's state.
"""

from __future__ import annotations

import functools

from django.conf import settings


@functools.cache
def key_prefix() -> str:
    """``<INSTANCE_NAMESPACE>:``, read once per process: keys on hot paths are made with it."""
    return f"{settings.INSTANCE_NAMESPACE}:"


def instance_key(name: str) -> str:
    """The Redis key of ``name`` for this instance."""
    return key_prefix() + name
