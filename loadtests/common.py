"""What every scenario shares: tokens, the purchase call and its validation.

Configuration comes from the environment, so that a locustfile runs the same
under the runner, in Locust's web UI and in distributed mode:

- ``LOADTEST_TOKENS``: a file of ``username token`` lines (``manage.py issue_tokens``)
- ``LOADTEST_VOUCHER``: the voucher id to buy
- ``LOADTEST_OUTCOMES``: a folder where each Locust process appends every purchase's
  outcome (``confirmed <order id>`` or the refusal code), for the audit (optional)
- ``LOADTEST_STAFF_TOKEN``: a staff token (the restock scenario)
- ``LOADTEST_WORKERS``: how many Locust processes share the tokens (default 1)
"""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

# Every answer a purchase may give, from DESIGN.md section 5. Anything else is a failure.
PURCHASE_REFUSALS = {409: {"sold_out", "already_purchased", "busy"}, 403: {"not_started", "ended"}}


def env_path(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"Set {name} (see loadtests/common.py).")
    return Path(value)


def load_tokens() -> list[str]:
    lines = env_path("LOADTEST_TOKENS").read_text().split("\n")
    return [line.split()[1] for line in lines if line.strip()]


def voucher_id() -> int:
    value = os.environ.get("LOADTEST_VOUCHER", "")
    if not value.isdigit():
        raise RuntimeError("Set LOADTEST_VOUCHER to the id of the voucher to buy.")
    return int(value)


class TokenDealer:
    """Hands out tokens so that Locust processes never share one: process ``k`` of ``n``
    takes tokens ``k``, ``k + n``, ``k + 2n``, ..."""

    def __init__(self) -> None:
        self._tokens: list[str] | None = None
        self._next = itertools.count()
        self._guard = threading.Lock()

    def deal(self, environment) -> str | None:
        """The next unused token of this process, or None when they are all used."""
        with self._guard:
            if self._tokens is None:
                self._tokens = load_tokens()
            workers = int(os.environ.get("LOADTEST_WORKERS", "1"))
            index = getattr(environment.runner, "worker_index", 0) if environment.runner else 0
            n = next(self._next)
            mine = self._tokens[index % workers :: workers]
            if not mine:
                raise RuntimeError("no tokens for this Locust process")
            return mine[n] if n < len(mine) else None


class OutcomeLog:
    """Appends every purchase's outcome to a file of this process's own.

    The file is opened on first use, in the process that writes: ``locust
    --processes`` imports the locustfile once and then forks its workers, and a
    file opened at import would be shared by all of them.
    """

    def __init__(self) -> None:
        self._folder = os.environ.get("LOADTEST_OUTCOMES")
        self._file = None
        self._pid = 0

    def add(self, outcome: str, order_id: int | None = None) -> None:
        if not self._folder:
            return
        if self._pid != os.getpid():
            Path(self._folder).mkdir(parents=True, exist_ok=True)
            self._file = open(Path(self._folder) / f"outcomes-{os.getpid()}.txt", "a", buffering=1)  # noqa: SIM115
            self._pid = os.getpid()
        self._file.write(f"{outcome} {order_id}\n" if order_id is not None else f"{outcome}\n")


outcomes = OutcomeLog()


def purchase(user, voucher: int, token: str) -> str:
    """POST the purchase and validate the answer; returns the outcome code.

    A 201/202 must carry an order id (logged for the audit); a refusal must be one
    of the documented codes with its documented status. Anything else fails.
    """
    with user.client.post(
        f"/api/vouchers/{voucher}/purchase",
        headers={"Authorization": f"Bearer {token}"},
        name="/api/vouchers/[id]/purchase",
        catch_response=True,
    ) as response:
        try:
            body = response.json()
        except Exception:  # noqa: BLE001
            response.failure(f"not JSON: status {response.status_code}")
            outcomes.add("error")
            return "error"
        if response.status_code in (201, 202) and isinstance(body.get("order_id"), int):
            outcomes.add("confirmed", body["order_id"])
            response.success()
            return "confirmed"
        code = body.get("code")
        if code in PURCHASE_REFUSALS.get(response.status_code, ()):
            response.success()  # a documented refusal is a correct answer
            outcomes.add(code)
            return code
        response.failure(f"unexpected answer {response.status_code} {body}")
        outcomes.add("error")
        return "error"
