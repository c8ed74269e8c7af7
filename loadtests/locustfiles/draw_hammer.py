"""Draw hammer: a few users, each firing many draws at once.

What it shows: the per-user draw limit under fire. Several Locust users share
each token, and they all start together once Locust has spawned them, so one user
has many draws in flight at the same moment; a safe strategy records at most
``draws_per_user`` draws per user and answers the rest ``draw_limit`` (or
``busy``), a naive one records more.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_POOL=1 LOADTEST_BUYERS=3 \\
        locust -f loadtests/locustfiles/draw_hammer.py --host http://127.0.0.1:8000
"""

import itertools

from locust import FastHttpUser, constant, task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.barrier import wait_for_everyone
from loadtests.common import draw, hammer_token, pool_id

seats = itertools.count()


class Hammer(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        # Every Locust process spreads its users over the same few users' tokens.
        self.token = hammer_token(self.environment, next(seats))
        self.pool = pool_id()
        wait_for_everyone()

    @task
    def draw_again_and_again(self) -> None:
        draw(self, self.pool, self.token)
