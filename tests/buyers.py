"""Many buyers in many processes, released at once against one voucher.

The parent closes its database connections and forks; each child process runs
one thread per buyer slot, all released together by a barrier that spans every
process, and reports what each purchase answered. The children share nothing
but the database (and Redis), exactly like gunicorn workers.
"""

from __future__ import annotations

import multiprocessing
import threading
import traceback
from collections import Counter
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections

from core.errors import DomainError
from orders.selectors import voucher_get
from orders.services import order_purchase

EXPECTED_REFUSALS = {"sold_out", "already_purchased", "busy"}


@dataclass
class Outcome:
    confirmed: list[int] = field(default_factory=list)  # order ids the service returned
    refusals: Counter = field(default_factory=Counter)  # domain error codes
    errors: list[str] = field(default_factory=list)  # anything else: always a bug

    @property
    def unexpected(self) -> list[str]:
        return self.errors + [code for code in self.refusals if code not in EXPECTED_REFUSALS]


def _buy(voucher_id: int, user_id: int, start: threading.Barrier, results: list) -> None:
    user = get_user_model()(pk=user_id)
    try:
        start.wait()
        order = order_purchase(user=user, voucher=voucher_get(voucher_id=voucher_id))
        results.append(("ok", order.pk))
    except DomainError as exc:
        results.append(("refused", exc.code))
    except Exception:  # noqa: BLE001  (reported to the parent, which fails the test)
        results.append(("error", traceback.format_exc()))
    finally:
        connections.close_all()


def _process(voucher_id: int, user_ids: list[int], race_ms: int, everyone: multiprocessing.Barrier, queue) -> None:
    settings.RACE_WINDOW_MS = race_ms
    results: list = []
    start = threading.Barrier(len(user_ids), action=everyone.wait)
    threads = [threading.Thread(target=_buy, args=(voucher_id, uid, start, results)) for uid in user_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    queue.put(results)


def buy_concurrently(*, voucher_id: int, plan: list[list[int]], race_ms: int, timeout: float = 120) -> Outcome:
    """Run ``plan``: one process per inner list, one thread per user id in it.

    Returns what every purchase answered. Raises if a process dies or hangs.
    """
    context = multiprocessing.get_context("fork")
    everyone = context.Barrier(len(plan))
    queue = context.Queue()
    connections.close_all()  # a forked child must never share the parent's socket
    processes = [
        context.Process(target=_process, args=(voucher_id, user_ids, race_ms, everyone, queue)) for user_ids in plan
    ]
    for process in processes:
        process.start()
    outcome = Outcome()
    try:
        for _ in processes:
            for kind, value in queue.get(timeout=timeout):
                if kind == "ok":
                    outcome.confirmed.append(value)
                elif kind == "refused":
                    outcome.refusals[value] += 1
                else:
                    outcome.errors.append(value)
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    assert all(p.exitcode == 0 for p in processes), [p.exitcode for p in processes]
    return outcome
