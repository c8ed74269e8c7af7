"""Pay race: every buyer pays at the last moment, around ``pay_by``, several times at once,
while the provider's confirmations come late, twice, or are lost and sent again.

What it shows: of a pay, the expiry at the deadline and the pay's own confirmation, one
decides: an order is paid, or released with its unit back in stock once (a pay that lost
the race is refused and its charge refunded), never both; every provider confirmation is
exactly one paid order or one refund; every pay answered 200 is a paid order. A naive
strategy lets a pay that read the order held write ``paid`` while a pay past the deadline
(or the expiry) that also read it held writes ``expired``: paid and released, units
returned twice, 200s for orders that are not paid.

Each Locust user is a till, as in ``crowd.py``: one buyer after another. A buyer who got
a unit waits until a moment drawn within ``LOADTEST_PAY_SPREAD_MS`` (250) of its
``pay_by``, then fires ``LOADTEST_VOLLEY`` (3) pays at once, ``LOADTEST_VOLLEY_STAGGER_MS``
(5) apart, as an impatient buyer's clicks would. The runner's server has the provider
confirm each charge at once (the pay answers 200) and post its callback up to a second
later, twice for half the charges, and lose a fifth of them, sent again by the beat
(``loadtests.lifecycle``).

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=1 locust -f loadtests/locustfiles/pay_race.py \\
        --host http://127.0.0.1:8000
"""

import random
from functools import partial

from locust import FastHttpUser, constant, task

from loadtests.common import TokenDealer, purchase_answer, voucher_id
from loadtests.holds_calls import PAY, change, deadline, env_number, volley, wait_until

dealer = TokenDealer()
SPREAD = env_number("LOADTEST_PAY_SPREAD_MS", 250) / 1000
VOLLEY = int(env_number("LOADTEST_VOLLEY", 3))
STAGGER = env_number("LOADTEST_VOLLEY_STAGGER_MS", 5) / 1000


class Buyer(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.voucher = voucher_id()

    @task
    def next_buyer_pays_at_the_last_moment(self) -> None:
        token = dealer.deal(self.environment)
        if token is None:  # the crowd has all tried: idle until the run ends
            self.wait_time = constant(3600)
            return
        _, answer = purchase_answer(self, self.voucher, token)
        if answer is None:
            return
        due = deadline(self, PAY, answer, token)
        if due is None:
            return
        wait_until(due + random.uniform(-SPREAD, SPREAD))
        pay = partial(change, self, PAY, answer["order_id"], token)
        volley([pay] * VOLLEY, STAGGER)
