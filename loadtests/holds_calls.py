"""The lifecycle's calls, for the locustfiles of its scenarios: a held record's pay, cancel
or claim, validated and logged for the audit; the wait until a ``redis_lua`` record is
written and its deadline known; and several calls fired at once, at a chosen moment.

Each call appends ``<action> <outcome> <record id>`` to the outcome file
(``loadtests.common``): ``<outcome>`` is what a 200 says (``paid``, ``cancelled``,
``claimed``), ``accepted`` for a pay answered 202 (the provider's confirmation on the way),
or the refusal's code (``expired``, ``forfeited``, ``pending``, ...). The runner checks
every ``pay paid`` and ``claim claimed`` against the database. Anything undocumented is
logged ``error`` and fails the run, as a take's is.

Imported by locustfiles only (gevent's greenlets fire the calls at once).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial

import gevent

from . import common
from .common import ERROR, json_object
from .history_log import history
from .verdict import POOL, VOUCHER

PAY, CANCEL, CLAIM = "pay", "cancel", "claim"
# What a 202 to a pay is logged as: charged, its confirmation to come by the callback.
ACCEPTED = "accepted"
# A redis_lua record not written yet: the refusal asks for the same call again.
PENDING = "pending"


class Call:
    """One of the lifecycle's calls: its path, the id its answer carries, what its 200 says,
    and its documented refusals (docs/api.md)."""

    def __init__(self, path: str, id_field: str, done: str, refusals: set[str]) -> None:
        self.path = path
        self.id_field = id_field
        self.done = done
        self.refusals = refusals

    def url(self, record_id: int) -> str:
        return self.path.format(id=record_id)

    @property
    def name(self) -> str:
        return self.path.format(id="[id]")


# ``busy``: a strategy's lock gave up; ``pending``: a redis_lua record not written yet.
CALLS = {
    PAY: Call("/api/orders/{id}/pay", "order_id", "paid", {"expired", "cancelled", "already_paid", PENDING, "busy"}),
    CANCEL: Call(
        "/api/orders/{id}/cancel", "order_id", "cancelled", {"expired", "cancelled", "already_paid", PENDING, "busy"}
    ),
    CLAIM: Call(
        "/api/draws/{id}/claim",
        "draw_id",
        "claimed",
        {"forfeited", "already_claimed", "nothing_held", PENDING, "busy"},
    ),
}
# Where a record is read back, by the call that changes it.
RECORD_PATHS = {PAY: "/api/orders/{id}", CANCEL: "/api/orders/{id}", CLAIM: "/api/draws/{id}"}
DEADLINES = {PAY: "pay_by", CANCEL: "pay_by", CLAIM: "claim_by"}


def change(user, action: str, record_id: int, token: str) -> str:
    """POST the pay, cancel or claim of ``record_id`` and validate the answer; returns the
    outcome (``paid``, ``accepted``, ``cancelled``, ``claimed``, a refusal's code, or ``error``)."""
    started = time.time()
    call = CALLS[action]
    with user.client.post(
        call.url(record_id), headers={"Authorization": f"Bearer {token}"}, name=call.name, catch_response=True
    ) as response:
        outcome = _changed(call, action, response, record_id)
        # Inside the request's block, as a take's is (``common.purchase_answer``).
        if history.kept:
            kind, item = (VOUCHER, common.voucher_id()) if action in (PAY, CANCEL) else (POOL, common.pool_id())
            history.add(
                start=started, action=action, kind=kind, item=item, token=token, status=response.status_code or 0,
                code=outcome, record=record_id,
            )  # fmt: skip
    return outcome


def _changed(call: Call, action: str, response, record_id: int) -> str:
    body = json_object(response)
    if body is None:
        return ERROR
    outcome = _outcome(call, action, response.status_code, body, record_id)
    if outcome == ERROR:
        return common.undocumented(response, f"unexpected answer to {action} {response.status_code} {body}")
    response.success()
    common.outcomes.add(action, outcome, record_id)
    return outcome


def _outcome(call: Call, action: str, status: int, body: dict, record_id: int) -> str:
    if status == 200 and body.get(call.id_field) == record_id and body.get("status") == call.done:
        return call.done
    if status == 202 and action == PAY and body.get("order_id") == record_id and body.get("payment") == PENDING:
        return ACCEPTED
    if status == 409 and body.get("code") in call.refusals:
        return body["code"]
    return ERROR


def change_once_written(user, action: str, record_id: int, token: str, timeout: float = 15) -> str:
    """``change``, sent again while the record is not written yet (``pending``, redis_lua)."""
    give_up = time.monotonic() + timeout
    while True:
        outcome = change(user, action, record_id, token)
        if outcome != PENDING or time.monotonic() >= give_up:
            return outcome
        gevent.sleep(0.2)


def deadline(user, action: str, answer: dict, token: str, timeout: float = 15) -> float | None:
    """When the record a take answered with is due (``time.time()``): its ``pay_by`` or
    ``claim_by``, read back once a ``redis_lua`` worker has written it (202). None when it is
    not held (settled when taken, a draw of nothing, failed), or was not written in time."""
    call = CALLS[action]
    record_id = answer[call.id_field]
    field = DEADLINES[action]
    give_up = time.monotonic() + timeout
    while answer.get("status") == PENDING:
        if time.monotonic() >= give_up:
            return None
        gevent.sleep(0.2)
        answer = _read_back(user, action, record_id, token)
        if answer is None:
            return None
    if answer.get("status") != "held" or not answer.get(field):
        return None
    return datetime.fromisoformat(answer[field]).timestamp()


def _read_back(user, action: str, record_id: int, token: str) -> dict | None:
    path = RECORD_PATHS[action]
    with user.client.get(
        path.format(id=record_id),
        headers={"Authorization": f"Bearer {token}"},
        name=path.format(id="[id]"),
        catch_response=True,
    ) as response:
        body = json_object(response)
        if body is None:
            return None
        if response.status_code == 200 and isinstance(body.get("status"), str):
            response.success()
            return body
        common.undocumented(response, f"reading {record_id} back answered {response.status_code}")
        return None


def env_number(name: str, default: float) -> float:
    """A scenario's knob from the environment (the runner passes none: its defaults hold)."""
    return float(os.environ.get(name) or default)


# How many calls a volley fires at once, and how far apart; how far from a deadline a
# volley aimed at it may land, either side.
VOLLEY = int(env_number("LOADTEST_VOLLEY", 3))
STAGGER = env_number("LOADTEST_VOLLEY_STAGGER_MS", 5) / 1000
SPREAD = env_number("LOADTEST_PAY_SPREAD_MS", 250) / 1000


def wait_until(moment: float) -> None:
    """Sleep this Locust user (its greenlet) until ``moment`` (``time.time()``)."""
    gevent.sleep(max(0.0, moment - time.time()))


def volley(calls: list[Callable[[], str]], stagger: float = 0.0) -> list[str]:
    """Fire ``calls`` at once, each ``stagger`` seconds after the one before (a buyer's
    double clicks, a client's retries), on connections of their own; their outcomes. A call
    that raised is an ``error``, logged as an undocumented answer is: its greenlet is not
    the Locust user's, whose exceptions ``loadtests.task_errors`` logs."""
    # The loop's clock is the time of its last turn: timers set from a stale one go off early.
    gevent.get_hub().loop.update_now()
    greenlets = [gevent.spawn_later(i * stagger, call) for i, call in enumerate(calls)]
    gevent.joinall(greenlets)
    for greenlet in greenlets:
        if not greenlet.successful():
            common.outcomes.add(ERROR)
    return [greenlet.value if greenlet.successful() else ERROR for greenlet in greenlets]


def volley_at_deadline(user, action: str, answer: dict, token: str) -> list[str]:
    """Fire a volley of ``action`` (a pay, a claim) at the record a take answered with, at
    a moment drawn within ``SPREAD`` of its deadline, once it is written; its outcomes
    (none for a record not held)."""
    due = deadline(user, action, answer, token)
    if due is None:
        return []
    wait_until(due + random.uniform(-SPREAD, SPREAD))
    record_id = answer[CALLS[action].id_field]
    return volley([partial(change, user, action, record_id, token)] * VOLLEY, STAGGER)
