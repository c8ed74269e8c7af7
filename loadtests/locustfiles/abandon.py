"""Abandon: a crowd buys a voucher whose units are held for payment, and a share of the
buyers never pay.

What it shows: an unpaid order expires at its ``pay_by`` (the worker's task at the
deadline, the beat's sweep behind it) and its unit goes back on sale exactly once; the
crowd still coming buys it again, so the sale ends with its supply sold once: available
+ held + paid == supply, no unit returned twice, and no unit left in stock while buyers
were still told ``sold_out``. A naive strategy expires a hold as it sells, read then
written: every server process asks for its own expiry task at the same deadline, and
two tasks running at once return one unit twice, which the crowd then buys: oversold
after returns.

Each Locust user is a till (``loadtests.tills``), as in ``crowd.py``: one buyer after
another, each trying once. A buyer who got a unit pays at once (``POST
/api/orders/{id}/pay``), or walks away with the probability ``LOADTEST_ABANDON_SHARE`` (0.5).

Against ``make run``: its voucher 2, the demo's bakery box, holds each unit ten minutes
for payment (give it a shorter window in the admin to see units come back within a run):

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=2 locust -f loadtests/locustfiles/abandon.py \\
        --host http://127.0.0.1:8000
"""

import random

from locust import task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import purchase_answer
from loadtests.holds_calls import PAY, change_once_written, env_number
from loadtests.tills import SaleTill

ABANDON_SHARE = env_number("LOADTEST_ABANDON_SHARE", 0.5)


class Buyer(SaleTill):
    @task
    def next_buyer_pays_or_walks_away(self) -> None:
        token = self.next_token()
        if token is None:
            return
        _, answer = purchase_answer(self, self.voucher, token)
        if answer is not None and random.random() >= ABANDON_SHARE:
            change_once_written(self, PAY, answer["order_id"], token)
