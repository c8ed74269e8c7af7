"""Hoarding: a few accounts keep a voucher with a short payment window sold out by buying,
abandoning and buying again, while one honest buyer asks now and then.

What it shows: the item's cap on a user's abandoned holds and its cooldown after each
(docs/design.md, "Abandoned holds"). Each hoarder (every Locust user but one, each one
account for the whole run) buys a unit, holds it ``LOADTEST_HOARD_HOLD_S`` (1.5 s) of its
window, cancels it and buys again at once; with more hoarders than units the others keep
asking, so a unit cancelled is bought again within milliseconds. The honest buyer waits
until the hoarders hold the stock (at most ``LOADTEST_HONEST_WAITS_S``, 2 s), then asks
every ``LOADTEST_HONEST_EVERY_S`` (0.25 s) until it buys, and pays. With the cap and the
cooldown off (``--abandon-limit 0 --abandon-cooldown-seconds 0``) the honest buyer hears
``sold_out`` ask after ask; with the defaults each hoarder is cooled down after an abandoned
hold and stopped after two, the units stay on sale, and the honest buyer gets one. Every
answer of the honest buyer goes to ``honest-<pid>.txt`` beside the outcomes, which the
runner's verdict reads.

Against ``make run``, whose vouchers cap abandoned holds by default (a token file with the
honest buyer's token first):

    LOADTEST_TOKENS=var/tokens.txt LOADTEST_VOUCHER=2 locust -f loadtests/locustfiles/hoarding.py \\
        --host http://127.0.0.1:8000 -u 7
"""

import os
import time
from pathlib import Path

import gevent
from locust import constant, task

import loadtests.task_errors  # noqa: F401 - a task's exception is an error outcome
from loadtests.common import purchase_answer
from loadtests.holds_calls import CANCEL, PAY, change_once_written, deadline, env_number
from loadtests.tills import SaleTill, idle
from loadtests.watch_calls import stock_read

HOLD_S = env_number("LOADTEST_HOARD_HOLD_S", 1.5)
HONEST_EVERY_S = env_number("LOADTEST_HONEST_EVERY_S", 0.25)
# The longest the honest buyer waits for the hoarders to hold the stock: fewer hoarders than
# units (the race lab's crowd against its stock) never do, and it asks then all the same.
HONEST_WAITS_S = env_number("LOADTEST_HONEST_WAITS_S", 2.0)
# The file of the honest buyer's answers, one a line: the runner's figure (``honest_asks``).
HONEST = "honest"


class HonestBuyer(SaleTill):
    """One buyer who wants one unit, asks every quarter second once the stock is held, and pays."""

    fixed_count = 1
    wait_time = constant(0)

    def on_start(self) -> None:
        super().on_start()
        self.token = self.next_token()
        self.bought = False
        self.asking = False
        self.waits_until = time.monotonic() + HONEST_WAITS_S

    @task
    def ask_until_bought(self) -> None:
        if self.token is None or self.bought:
            idle(self)
            return
        # From the moment the hoarders first hold every unit on, whatever the stock then.
        self.asking = self.asking or time.monotonic() >= self.waits_until or self.stock_held()
        if not self.asking:
            gevent.sleep(0.02)
            return
        outcome, answer = purchase_answer(self, self.voucher, self.token)
        _honest(outcome)
        if answer is None:
            gevent.sleep(HONEST_EVERY_S)
            return
        self.bought = True
        change_once_written(self, PAY, answer["order_id"], self.token)

    def stock_held(self) -> bool:
        """Whether the hoarders hold every unit: the honest buyer comes after they do. A read
        answered otherwise than documented is an error outcome (``watch_calls``)."""
        return stock_read(self, self.voucher, self.token) == 0


class Hoarder(SaleTill):
    """One account that buys, holds a moment, cancels and buys again, for the whole run."""

    weight = 1
    wait_time = constant(0)

    def on_start(self) -> None:
        super().on_start()
        self.token = self.next_token()

    @task
    def buy_hold_cancel(self) -> None:
        if self.token is None:
            return
        outcome, answer = purchase_answer(self, self.voucher, self.token)
        if answer is None:
            # Sold out: ask again at once, to be first to a unit cancelled. Cooled down or
            # capped: come back a second later, as the refusal's Retry-After says.
            gevent.sleep(0 if outcome == "sold_out" else 1)
            return
        if deadline(self, CANCEL, answer, self.token) is None:
            return
        gevent.sleep(HOLD_S)
        change_once_written(self, CANCEL, answer["order_id"], self.token)


def _honest(outcome: str) -> None:
    folder = os.environ.get("LOADTEST_OUTCOMES")
    if folder:
        with open(Path(folder) / f"{HONEST}-{os.getpid()}.txt", "a") as answers:
            answers.write(f"{outcome}\n")
