"""Surge through a waiting room: the crowd's buyers, each trying once, arrive at a voucher whose
admission is ``queue`` (``--admission-rate`` a second); each joins its queue, polls it until
admitted (when the room's ``poll_after_seconds`` says), and buys with the ticket,
or leaves when told it is sold out.

What it shows: beside the ``surge`` scenario (the same crowd at the take at once), the take's
latencies, errors and timeouts with the waiting room against without, every unit still sold
once, and how fairly the room admitted (``loadtests.admissions``: inversions, the longest wait).

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=1 locust -f loadtests/locustfiles/surge_queue.py \\
        --host http://127.0.0.1:8000
"""

from locust import task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import COME_BACK, purchase
from loadtests.queue_calls import queue_through
from loadtests.tills import SaleTill


class Buyer(SaleTill):
    # A request unanswered this long is a timeout, counted among the run's failures.
    network_timeout = 10.0
    connection_timeout = 10.0

    @task
    def next_buyer_queues_then_tries_once(self) -> None:
        token = self.next_token()
        if token is None:  # the crowd has all come: the till idles until the run ends
            return
        ticket = queue_through(self, self.voucher, token)
        if ticket is None:
            return
        # Told to come back (503): once more, with the same ticket, which such a refusal keeps good.
        if purchase(self, self.voucher, token, ticket=ticket) in COME_BACK:
            purchase(self, self.voucher, token, ticket=ticket)
