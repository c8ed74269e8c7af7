"""Restock: buyers keep buying while staff restock through the staff API.

What it shows: a restock is a relative update through the guarded service, so it
composes with concurrent purchases: every unit supplied (initial stock plus every
restock) ends up sold or still in stock. A naive strategy's absolute writes lose
restocked units as well as sold ones.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=1 LOADTEST_STAFF_TOKEN=... \\
        locust -f loadtests/locustfiles/restock.py --host http://127.0.0.1:8000
"""

import os

from locust import FastHttpUser, between, task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests import restock_calls
from loadtests.common import voucher_id
from loadtests.locustfiles import crowd  # the module, so that Locust does not run its Buyer twice

RESTOCK_UNITS = int(os.environ.get("LOADTEST_RESTOCK_UNITS", "5"))


class Buyer(crowd.Buyer):
    """The crowd's till: one buyer after another, each trying once."""

    weight = 20


class Staff(FastHttpUser):
    weight = 1
    fixed_count = 1
    wait_time = between(0.2, 0.4)

    def on_start(self) -> None:
        self.token = os.environ["LOADTEST_STAFF_TOKEN"]
        self.voucher = voucher_id()

    @task
    def restock(self) -> None:
        # A refusal the API does not document (a 403 for staff without the permission, a
        # 500) is an error outcome, which fails a safe strategy's run: ``restock_calls``.
        restock_calls.restock(self, self.voucher, self.token, RESTOCK_UNITS)
