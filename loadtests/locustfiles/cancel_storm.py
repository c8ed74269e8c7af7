"""Cancel storm: buyers cancel their held orders with many cancels at once, some paying in
the same breath, and buy again.

What it shows: of cancels racing each other and a pay, one decides: the order is
cancelled with its unit back in stock once, or paid, never both; a cancelled buyer may
buy again, and holds at most one held or paid order at a time; the stock ends at supply
minus what is held or paid. A naive strategy lets every cancel that read the order held
return its unit, so one cancel storm puts units in stock that were never there, and
the crowd buys them: oversold after returns, orders paid and cancelled.

Each Locust user is a till (``loadtests.tills``), as in ``crowd.py``: one buyer after
another. A buyer who got a unit fires ``LOADTEST_VOLLEY`` (3) cancels at once,
``LOADTEST_VOLLEY_STAGGER_MS`` (5) apart (the first of them a pay instead, with the
probability ``LOADTEST_PAY_WITH_CANCEL``, 0.25), and once cancelled buys again, up to
``LOADTEST_CANCEL_ROUNDS`` (3) times. (A draw has no cancel, so there is no pool's storm:
a winner claims or lets the prize go, which ``claim-race`` races.)

Against ``make run``: its voucher 2, the demo's bakery box, holds each unit ten minutes
for payment (give it a shorter window in the admin to see units come back within a run):

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=2 locust -f loadtests/locustfiles/cancel_storm.py \\
        --host http://127.0.0.1:8000
"""

import random
from functools import partial

from locust import task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import purchase_answer
from loadtests.holds_calls import CANCEL, PAY, STAGGER, VOLLEY, change, deadline, env_number, volley
from loadtests.tills import SaleTill

ROUNDS = int(env_number("LOADTEST_CANCEL_ROUNDS", 3))
PAY_WITH_CANCEL = env_number("LOADTEST_PAY_WITH_CANCEL", 0.25)


class Buyer(SaleTill):
    @task
    def next_buyer_cancels_and_buys_again(self) -> None:
        token = self.next_token()
        if token is None:
            return
        for _ in range(ROUNDS):
            _, answer = purchase_answer(self, self.voucher, token)
            # Read back once written (redis_lua): a cancel before that is only refused pending.
            if answer is None or deadline(self, CANCEL, answer, token) is None:
                return
            order = answer["order_id"]
            calls = [partial(change, self, CANCEL, order, token) for _ in range(VOLLEY)]
            if random.random() < PAY_WITH_CANCEL:
                calls[0] = partial(change, self, PAY, order, token)
            if "cancelled" not in volley(calls, STAGGER):
                return
