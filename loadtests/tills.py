"""The tills the crowd's scenarios serve at: a Locust user stands for a till and serves one
buyer (one token) after another until the crowd has all come, then idles until the run
ends. The number of Locust users is the concurrency; the number of tokens is the crowd.

Imported by locustfiles only (it imports Locust).
"""

from __future__ import annotations

from locust import FastHttpUser, constant

from .common import NO_PRIZE, UNAVAILABLE, UNCONFIRMED, WON, TokenDealer, draw_answer, pool_id, voucher_id

# One per Locust process: the tokens it deals are never another process's.
dealer = TokenDealer()
# How long an idle till waits between its tasks: longer than any run.
IDLE_SECONDS = 3600
# A user at a draw till draws again after these (503 unavailable: the fault runner took a
# dependency away; 503 unconfirmed); any other answer (draw_limit, pool_empty, the window closed, an
# error) sends the next user up.
DRAW_AGAIN = {WON, NO_PRIZE, "busy", UNAVAILABLE, UNCONFIRMED}


def idle(user) -> None:
    """Leave ``user`` idle until the run ends. A wait set on the user itself is a plain function:
    Locust's ``constant`` takes the user as a method does, and set there it raised at every wait
    (an exception per till once the crowd had all come, logged by Locust and nowhere else)."""
    user.wait_time = lambda: IDLE_SECONDS


class Till(FastHttpUser):
    abstract = True
    wait_time = constant(0)

    def next_token(self) -> str | None:
        """The next buyer's token; None once the crowd has all come, and the till idles."""
        token = dealer.deal(self.environment)
        if token is None:
            idle(self)
        return token


class SaleTill(Till):
    """A till of the flash sale: its buyers buy the run's voucher."""

    abstract = True

    def on_start(self) -> None:
        self.voucher = voucher_id()


class DrawTill(Till):
    """A till of the prize draw: each of its users draws from the run's pool until refused."""

    abstract = True

    def on_start(self) -> None:
        self.pool = pool_id()
        self.token: str | None = None

    def draw_next(self) -> tuple[str | None, str, dict | None]:
        """The current user's next draw: (its token, the outcome, the answer when recorded);
        no token once the crowd has all drawn. After a refusal the next user steps up."""
        if self.token is None:
            self.token = self.next_token()
            if self.token is None:
                return None, "", None
        token = self.token
        outcome, answer = draw_answer(self, self.pool, token)
        if outcome not in DRAW_AGAIN:
            self.token = None
        return token, outcome, answer
