"""Claim race: every winner claims at the last moment, around ``claim_by``, several times
at once.

What it shows: of a claim and the forfeit at the deadline, one decides: a prize is
claimed, or forfeited and back in the pool once, never both, and every claim answered 200
is a claimed draw. A naive strategy lets a claim that read the draw held write
``claimed`` while a claim past the deadline (or the expiry) that also read it held writes
``forfeited``: claimed and forfeited, prizes returned twice and won again beyond their
supply.

Each Locust user is a till (``loadtests.tills``), as in ``draw_crowd.py``: one user
after another, each drawing until refused. A prize won is claimed by a volley at its
deadline (``holds_calls.volley_at_deadline``: ``LOADTEST_VOLLEY``, 3 claims at once,
``LOADTEST_VOLLEY_STAGGER_MS``, 5 ms apart, at a moment drawn within
``LOADTEST_PAY_SPREAD_MS``, 250, of its ``claim_by``).

Against ``make run``, give its pool (1) a claim window in the admin first: the demo's pool
settles each draw at once.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_POOL=1 locust -f loadtests/locustfiles/claim_race.py \\
        --host http://127.0.0.1:8000
"""

from locust import task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import WON
from loadtests.holds_calls import CLAIM, volley_at_deadline
from loadtests.tills import DrawTill


class Drawer(DrawTill):
    @task
    def draw_then_claim_at_the_last_moment(self) -> None:
        token, outcome, answer = self.draw_next()
        if outcome == WON and answer is not None:
            volley_at_deadline(self, CLAIM, answer, token)
