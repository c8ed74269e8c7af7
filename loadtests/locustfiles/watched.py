"""Watched: the crowd of ``crowd.py`` while open tabs watch the sale, as a flash sale's page
is watched by far more people than buy at any moment.

What it shows: the pages a tab polls (the voucher's live part and the shop's rows, every
2 s each, as their htmx does) cost the take nothing that grows with the site: they read
the running totals, not the orders. The verdict is the crowd's; the tabs' answers are in
Locust's report, named ``watch ...``, and kept out of the run's p50/p95/p99, which stay the
take's. A page answered otherwise than documented (a 500) is an error outcome, counted as an
undocumented answer of the crowd's is (``loadtests.watch_calls``).

``LOADTEST_WATCHERS`` tabs (default 200), anonymous, each polling both parts every 2 s;
the rest of Locust's users are the crowd's tills.

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=1 LOADTEST_WATCHERS=200 \\
        locust -f loadtests/locustfiles/watched.py -u 216 --host http://127.0.0.1:8000
"""

import os

from locust import HttpUser, constant, task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import env_id
from loadtests.locustfiles.crowd import Buyer  # noqa: F401 - the crowd's tills run beside the tabs
from loadtests.watch_calls import page_watched


class Watcher(HttpUser):
    fixed_count = int(os.environ.get("LOADTEST_WATCHERS", "200"))
    wait_time = constant(2)

    def on_start(self) -> None:
        self.voucher = env_id("LOADTEST_VOUCHER", "the voucher to watch")

    @task
    def poll_as_an_open_tab(self) -> None:
        # A page answered otherwise than documented is an error outcome (``watch_calls``).
        page_watched(self, f"/vouchers/{self.voucher}/live", "/vouchers/[id]/live")
        page_watched(self, "/vouchers/stock", "/vouchers/stock")
