"""A Locust user's exception logged as the error it is: a task, or a user's start, that raised
(an answer read past what its checks allowed, a setting missing, a bug of the locustfile) is
written to the outcomes as ``error``, as an undocumented answer is (``common.undocumented``),
so that the verdict counts it (``Result.failures``). Locust alone would log it and go on, and
the buyer it served would leave the run without a trace in its figures.

Every locustfile that writes outcomes imports this module (``baseline.py``, which writes none,
is judged by Locust's own failures). Imported by locustfiles only (it imports Locust); one
listener per process, however many modules import it.
"""

from __future__ import annotations

from locust import events

from . import common


@events.user_error.add_listener
def _task_raised(**kwargs) -> None:
    # Fired for a task's or a user's start's exception; not for Locust's own ways of stopping
    # a user (StopUser, StopTest), nor for a volley's greenlets (``holds_calls.volley``).
    common.outcomes.add(common.ERROR)
