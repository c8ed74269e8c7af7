"""Many actors in many processes, released at once against the same rows.

The parent closes its database connections and forks; each child process runs
one thread per slot of its part of the plan, all released together by a barrier
that spans every process, and reports what each action answered. The children
share nothing but the database (and Redis), exactly like gunicorn workers.
"""

from __future__ import annotations

import multiprocessing
import threading
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections

from core.errors import DomainError

EXPECTED_REFUSALS = {"sold_out", "already_purchased", "busy", "draw_limit", "pool_empty"}


@dataclass
class Outcome:
    confirmed: list = field(default_factory=list)  # what each successful action returned
    refusals: Counter = field(default_factory=Counter)  # domain error codes
    errors: list[str] = field(default_factory=list)  # anything else: always a bug

    @property
    def unexpected(self) -> list[str]:
        return self.errors + [code for code in self.refusals if code not in EXPECTED_REFUSALS]


def _act(act: Callable, slot, start: threading.Barrier, results: list) -> None:
    try:
        # Connected before the release, as a server's worker is before a request comes: the
        # race is between the actions, not between connection set-ups (which took longer
        # than the race window itself on a busy machine, so that the late ones read after
        # the early ones had written).
        connections["default"].ensure_connection()
        start.wait()
        results.append(("ok", act(slot)))
    except DomainError as exc:
        results.append(("refused", exc.code))
    except Exception:  # noqa: BLE001  (reported to the parent, which fails the test)
        results.append(("error", traceback.format_exc()))
    finally:
        connections.close_all()


def _process(act: Callable, slots: list, race_ms: int, everyone: multiprocessing.Barrier, queue) -> None:
    settings.RACE_WINDOW_MS = race_ms
    results: list = []
    start = threading.Barrier(len(slots), action=everyone.wait)
    threads = [threading.Thread(target=_act, args=(act, slot, start, results)) for slot in slots]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    queue.put(results)


def act_concurrently(*, act: Callable, plan: list[list], race_ms: int, timeout: float = 120) -> Outcome:
    """Run ``plan``: one process per inner list, one thread per slot in it, each thread
    calling ``act(slot)`` once, all at the same moment.

    ``act`` must return something picklable (an id). Returns what every action
    answered. Raises if a process dies or hangs.
    """
    context = multiprocessing.get_context("fork")
    everyone = context.Barrier(len(plan))
    queue = context.Queue()
    connections.close_all()  # a forked child must never share the parent's socket
    processes = [context.Process(target=_process, args=(act, slots, race_ms, everyone, queue)) for slots in plan]
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


def buy_concurrently(*, voucher_id: int, plan: list[list[int]], race_ms: int, timeout: float = 120) -> Outcome:
    """Each slot is a user id buying ``voucher_id`` once; ``confirmed`` holds the order ids
    (``Order.public_id``: a ``redis_lua`` order's is its reservation's)."""
    from orders.selectors import voucher_get
    from orders.services import order_purchase

    def buy(user_id: int) -> int:
        return order_purchase(user=get_user_model()(pk=user_id), voucher=voucher_get(voucher_id=voucher_id)).public_id

    return act_concurrently(act=buy, plan=plan, race_ms=race_ms, timeout=timeout)


def draw_concurrently(*, pool_id: int, plan: list[list[int]], race_ms: int, timeout: float = 120) -> Outcome:
    """Each slot is a user id drawing once in ``pool_id``; ``confirmed`` holds
    ``(draw_id, prize_id or None)`` (``Draw.public_id``)."""
    from lottery.selectors import pool_get
    from lottery.services import pool_draw

    def draw(user_id: int) -> tuple[int, int | None]:
        result = pool_draw(user=get_user_model()(pk=user_id), pool=pool_get(pool_id=pool_id))
        return result.public_id, result.prize_id

    return act_concurrently(act=draw, plan=plan, race_ms=race_ms, timeout=timeout)
