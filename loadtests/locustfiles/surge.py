"""Surge without a waiting room: the crowd's buyers, each trying once, all at the take at once,
with the same timeouts as ``surge_queue.py``, whose figures it stands beside.

What it shows: a crowd far beyond the take's capacity queues inside the server; every unit is
still sold once under a safe strategy, but the take's latencies grow with the crowd, and a
request unanswered within 10 s counts as a timeout.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=1 locust -f loadtests/locustfiles/surge.py \\
        --host http://127.0.0.1:8000
"""

from locust import task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import COME_BACK, purchase
from loadtests.tills import SaleTill


class Buyer(SaleTill):
    network_timeout = 10.0
    connection_timeout = 10.0

    @task
    def next_buyer_tries_once(self) -> None:
        token = self.next_token()
        if token is None:
            return
        if purchase(self, self.voucher, token) in COME_BACK:
            purchase(self, self.voucher, token)
