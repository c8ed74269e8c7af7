"""Draw crowd: many users, each drawing up to the pool's limit, for far fewer prizes than draws.

What it shows: with a naive strategy (``none``, or ``local`` across server
processes) more prizes are awarded than the pool holds: draws that chose the same
prize at the same moment each write its stock minus one. With a safe one every
prize is awarded at most as many times as it was supplied, and once the pool is
empty everyone hears ``pool_empty``.

Each Locust user stands for a till, as in ``crowd.py``: it serves one user (one
token) after another, and each user draws once after the other until told
``draw_limit`` or ``pool_empty``. The number of Locust users is the concurrency;
the number of tokens is the crowd.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_POOL=1 locust -f loadtests/locustfiles/draw_crowd.py \\
        --host http://127.0.0.1:8000
"""

from locust import FastHttpUser, constant, task

from loadtests.common import NO_PRIZE, UNAVAILABLE, WON, TokenDealer, draw, pool_id

dealer = TokenDealer()
# A user at the till draws again after these (503 unavailable: the fault runner took a
# dependency away); any other answer (draw_limit, pool_empty, the window closed, an
# error) sends the next user up.
DRAW_AGAIN = {WON, NO_PRIZE, "busy", UNAVAILABLE}


class Drawer(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.pool = pool_id()
        self.token: str | None = None

    @task
    def draw_until_refused(self) -> None:
        if self.token is None:
            self.token = dealer.deal(self.environment)
            if self.token is None:  # the crowd has all drawn: idle until the run ends
                self.wait_time = constant(3600)
                return
        if draw(self, self.pool, self.token) not in DRAW_AGAIN:
            self.token = None
