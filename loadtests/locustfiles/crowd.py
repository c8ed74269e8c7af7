"""Crowd: many buyers, each trying once, for a stock much smaller than the crowd.

What it shows: with a naive strategy (``none``, or ``local`` across server
processes) more buyers are confirmed than there is stock; with a safe one
exactly the stock is sold and everyone else hears ``sold_out``.

Each Locust user stands for a till (``loadtests.tills``): it serves one buyer (one
token) after another, each buyer trying once, until the tokens run out. The number of
Locust users is the concurrency; the number of tokens is the crowd.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=1 locust -f loadtests/locustfiles/crowd.py \\
        --host http://127.0.0.1:8000
"""

from locust import task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import COME_BACK, purchase
from loadtests.tills import SaleTill


class Buyer(SaleTill):
    def on_start(self) -> None:
        super().on_start()
        self.told_to_come_back: str | None = None

    @task
    def next_buyer_tries_once(self) -> None:
        token = self.told_to_come_back or self.next_token()
        if token is None:  # the crowd has all tried: the till idles until the run ends
            return
        # A buyer told to try again (503 unavailable: the fault runner took a dependency
        # away; or unconfirmed) stays at the till rather than leaving the crowd, so that a
        # fault does not use the crowd up.
        self.told_to_come_back = token if purchase(self, self.voucher, token) in COME_BACK else None
