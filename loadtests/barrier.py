"""A start line for the hammers: their Locust users wait until every user has spawned,
then fire together.

Spawned one by one (``--spawn-rate``), the first users of a hammer would use up their
buyer's turn (one order, a few draws) before the rest arrive, and the per-user rule
would never be under fire. Imported by locustfiles only: importing Locust patches
the process for gevent, which the runner must not be.
"""

from __future__ import annotations

from gevent.event import Event
from locust import events

_everyone_spawned = Event()


@events.spawning_complete.add_listener
def _open(user_count: int, **kwargs) -> None:
    # Fired on the master and, relayed, on every worker process (``--processes``).
    _everyone_spawned.set()


def wait_for_everyone() -> None:
    """Block this Locust user (its greenlet) until Locust has spawned them all."""
    _everyone_spawned.wait()
