"""Restock: buyers keep buying while staff restock through the staff API.

What it shows: a restock is a relative update through the guarded service, so it
composes with concurrent purchases: every unit supplied (initial stock plus every
restock) ends up sold or still in stock. A naive strategy's absolute writes lose
restocked units as well as sold ones.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=1 LOADTEST_STAFF_TOKEN=... \\
        locust -f loadtests/locustfiles/restock.py --host http://127.0.0.1:8000
"""

import os
import time

from locust import FastHttpUser, between, task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import ERROR, voucher_id
from loadtests.history_log import RESTOCK, history
from loadtests.locustfiles import crowd  # the module, so that Locust does not run its Buyer twice
from loadtests.verdict import VOUCHER

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
        self.headers = {"Authorization": f"Bearer {self.token}"}
        self.voucher = voucher_id()

    @task
    def restock(self) -> None:
        started = time.time()
        with self.client.patch(
            f"/api/admin/vouchers/{self.voucher}",
            json={"restock": RESTOCK_UNITS},
            headers=self.headers,
            name="/api/admin/vouchers/[id] restock",
            catch_response=True,
        ) as response:
            restocked = response.status_code == 200 and response.json().get("id") == self.voucher
            if restocked:
                response.success()
            else:
                response.failure(f"restock answered {response.status_code}")
            history.add(
                start=started, action=RESTOCK, kind=VOUCHER, item=self.voucher, token=self.token,
                status=response.status_code or 0, code="restocked" if restocked else ERROR, units=RESTOCK_UNITS,
            )  # fmt: skip
