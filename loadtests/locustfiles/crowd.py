"""Crowd: many buyers, each trying once, for a stock much smaller than the crowd.

What it shows: with a naive strategy (``none``, or ``local`` across server
processes) more buyers are confirmed than there is stock; with a safe one
exactly the stock is sold and everyone else hears ``sold_out``.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=1 locust -f loadtests/locustfiles/crowd.py \\
        --host http://127.0.0.1:8000
"""

from locust import FastHttpUser, constant, task

from loadtests.common import TokenDealer, purchase, voucher_id

dealer = TokenDealer()


class Buyer(FastHttpUser):
    wait_time = constant(3600)  # one attempt each, then idle until the run ends

    def on_start(self) -> None:
        self.token = dealer.deal(self.environment)
        self.voucher = voucher_id()

    @task
    def buy_once(self) -> None:
        purchase(self, self.voucher, self.token)
