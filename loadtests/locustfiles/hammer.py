"""Hammer: a few buyers, each firing many purchases at once.

What it shows: the one-per-user rule under fire. Several Locust users share each
token, and they all start together once Locust has spawned them, so one buyer
has many purchases in flight at the same moment; a safe strategy confirms at most
one order per buyer, a naive one confirms several.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=1 LOADTEST_BUYERS=3 \\
        locust -f loadtests/locustfiles/hammer.py --host http://127.0.0.1:8000
"""

import itertools

from locust import FastHttpUser, constant, task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.barrier import wait_for_everyone
from loadtests.common import hammer_token, purchase, voucher_id

seats = itertools.count()


class Hammer(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        # Every Locust process spreads its users over the same few buyers.
        self.token = hammer_token(self.environment, next(seats))
        self.voucher = voucher_id()
        wait_for_everyone()

    @task
    def buy_again_and_again(self) -> None:
        purchase(self, self.voucher, self.token)
