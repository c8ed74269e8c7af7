"""Hammer: a few buyers, each firing many purchases at once.

What it shows: the one-per-user rule under fire. Several Locust users share each
token, so one buyer has many purchases in flight at the same moment; a safe
strategy confirms at most one order per buyer, a naive one confirms several.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=1 LOADTEST_BUYERS=3 \\
        locust -f loadtests/locustfiles/hammer.py --host http://127.0.0.1:8000
"""

import itertools
import os

from locust import FastHttpUser, constant, task

from loadtests.common import load_tokens, purchase, voucher_id

BUYERS = int(os.environ.get("LOADTEST_BUYERS", "3"))
seats = itertools.count()


class Hammer(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        # Every Locust process spreads its users over the same few buyers.
        tokens = load_tokens()[:BUYERS]
        self.token = tokens[next(seats) % len(tokens)]
        self.voucher = voucher_id()

    @task
    def buy_again_and_again(self) -> None:
        purchase(self, self.voucher, self.token)
