"""Draw abandon: a crowd draws from a pool whose prizes are held for their claim, and a
share of the winners never claim.

What it shows: an unclaimed prize is forfeited at its ``claim_by`` (the worker's task at
the deadline, the beat's sweep behind it) and goes back to the pool exactly once; the
users still drawing win it again, so every prize ends awarded at most as many times as it
was supplied (stock + held + claimed == supply, per prize), none returned twice, none left
in the pool while users were still told ``pool_empty``. A forfeited draw still counts
against its user's limit. A naive strategy forfeits as it awards, read then written: two
expiry tasks at one deadline return one prize twice, and it is won again beyond its supply.

Each Locust user is a till (``loadtests.tills``), as in ``draw_crowd.py``: one user
after another, each drawing until refused. A prize won is claimed at once (``POST
/api/draws/{id}/claim``), or left with the probability ``LOADTEST_ABANDON_SHARE`` (0.5).

Against ``make run``, give its pool (1) a claim window in the admin first: the demo's pool
settles each draw at once.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_POOL=1 locust -f loadtests/locustfiles/draw_abandon.py \\
        --host http://127.0.0.1:8000
"""

import random

from locust import task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import WON
from loadtests.holds_calls import CLAIM, change_once_written, env_number
from loadtests.tills import DrawTill

ABANDON_SHARE = env_number("LOADTEST_ABANDON_SHARE", 0.5)


class Drawer(DrawTill):
    @task
    def draw_then_claim_or_leave_it(self) -> None:
        token, outcome, answer = self.draw_next()
        if outcome == WON and answer is not None and random.random() >= ABANDON_SHARE:
            change_once_written(self, CLAIM, answer["draw_id"], token)
