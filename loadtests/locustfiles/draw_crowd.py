"""Draw crowd: many users, each drawing up to the pool's limit, for far fewer prizes than draws.

What it shows: with a naive strategy (``none``, or ``local`` across server
processes) more prizes are awarded than the pool holds: draws that chose the same
prize at the same moment each write its stock minus one. With a safe one every
prize is awarded at most as many times as it was supplied, and once the pool is
empty everyone hears ``pool_empty``.

Each Locust user stands for a till (``loadtests.tills``): it serves one user (one
token) after another, and each user draws once after the other until told
``draw_limit`` or ``pool_empty``. The number of Locust users is the concurrency;
the number of tokens is the crowd.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_POOL=1 locust -f loadtests/locustfiles/draw_crowd.py \\
        --host http://127.0.0.1:8000
"""

from locust import task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.tills import DrawTill


class Drawer(DrawTill):
    @task
    def draw_until_refused(self) -> None:
        self.draw_next()
