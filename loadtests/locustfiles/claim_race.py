"""Claim race: every winner claims at the last moment, around ``claim_by``, several times
at once.

What it shows: of a claim and the forfeit at the deadline, one decides: a prize is
claimed, or forfeited and back in the pool once, never both, and every claim answered 200
is a claimed draw. A naive strategy lets a claim that read the draw held write
``claimed`` while a claim past the deadline (or the expiry) that also read it held writes
``forfeited``: claimed and forfeited, prizes returned twice and won again beyond their
supply.

Each Locust user is a till, as in ``draw_crowd.py``: one user after another, each drawing
until refused. A prize won is claimed at a moment drawn within ``LOADTEST_PAY_SPREAD_MS``
(250) of its ``claim_by``, by ``LOADTEST_VOLLEY`` (3) claims fired at once,
``LOADTEST_VOLLEY_STAGGER_MS`` (5) apart.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_POOL=1 locust -f loadtests/locustfiles/claim_race.py \\
        --host http://127.0.0.1:8000
"""

import random
from functools import partial

from locust import FastHttpUser, constant, task

from loadtests.common import WON, TokenDealer, draw_answer, pool_id
from loadtests.holds_calls import CLAIM, change, deadline, env_number, volley, wait_until
from loadtests.locustfiles.draw_crowd import DRAW_AGAIN

dealer = TokenDealer()
SPREAD = env_number("LOADTEST_PAY_SPREAD_MS", 250) / 1000
VOLLEY = int(env_number("LOADTEST_VOLLEY", 3))
STAGGER = env_number("LOADTEST_VOLLEY_STAGGER_MS", 5) / 1000


class Drawer(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.pool = pool_id()
        self.token: str | None = None

    @task
    def draw_then_claim_at_the_last_moment(self) -> None:
        if self.token is None:
            self.token = dealer.deal(self.environment)
            if self.token is None:  # the crowd has all drawn: idle until the run ends
                self.wait_time = constant(3600)
                return
        token = self.token
        outcome, answer = draw_answer(self, self.pool, token)
        if outcome not in DRAW_AGAIN:
            self.token = None
        if outcome != WON or answer is None:
            return
        due = deadline(self, CLAIM, answer, token)
        if due is None:
            return
        wait_until(due + random.uniform(-SPREAD, SPREAD))
        claim = partial(change, self, CLAIM, answer["draw_id"], token)
        volley([claim] * VOLLEY, STAGGER)
