"""Pay race: every buyer pays at the last moment, around ``pay_by``, several times at once,
while the provider's confirmations come late, twice, or are lost and sent again.

What it shows: of a pay, the expiry at the deadline and the pay's own confirmation, one
decides: an order is paid, or released with its unit back in stock once (a pay that lost
the race is refused and its charge refunded), never both; every provider confirmation is
exactly one paid order or one refund; every pay answered 200 is a paid order. A naive
strategy lets a pay that read the order held write ``paid`` while a pay past the deadline
(or the expiry) that also read it held writes ``expired``: paid and released, units
returned twice, 200s for orders that are not paid.

Each Locust user is a till (``loadtests.tills``), as in ``crowd.py``: one buyer after
another. A buyer who got a unit fires a volley of pays at its deadline
(``holds_calls.volley_at_deadline``: ``LOADTEST_VOLLEY``, 3 pays at once,
``LOADTEST_VOLLEY_STAGGER_MS``, 5 ms apart, at a moment drawn within
``LOADTEST_PAY_SPREAD_MS``, 250, of its ``pay_by``), as an impatient buyer's clicks would.
The runner's server has the provider confirm each charge at once (the pay answers 200)
and post its callback up to a second later, twice for half the charges, and lose a fifth
of them, sent again by the beat (``loadtests.lifecycle``).

Against ``make run``: its voucher 2, the demo's bakery box, holds each unit ten minutes
for payment (give it a shorter window in the admin to see units come back within a run):

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=2 locust -f loadtests/locustfiles/pay_race.py \\
        --host http://127.0.0.1:8000
"""

from locust import task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import purchase_answer
from loadtests.holds_calls import PAY, volley_at_deadline
from loadtests.tills import SaleTill


class Buyer(SaleTill):
    @task
    def next_buyer_pays_at_the_last_moment(self) -> None:
        token = self.next_token()
        if token is None:
            return
        _, answer = purchase_answer(self, self.voucher, token)
        if answer is not None:
            volley_at_deadline(self, PAY, answer, token)
