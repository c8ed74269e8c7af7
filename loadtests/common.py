"""What every scenario shares: tokens, the purchase and draw calls and their validation,
and the outcome files the runner audits.

Configuration comes from the environment, so that a locustfile runs the same
under the runner, in Locust's web UI and in distributed mode:

- ``LOADTEST_TOKENS``: a file of ``username token`` lines (``manage.py issue_tokens``)
- ``LOADTEST_VOUCHER``: the voucher id to buy
- ``LOADTEST_POOL``: the pool id to draw from
- ``LOADTEST_OUTCOMES``: a folder where each Locust process appends every answer's
  outcome, for the audit (optional): ``confirmed <order id>``, ``won <draw id> <prize
  id>``, ``no_prize <draw id>``, the refusal code, or ``error`` (an undocumented answer on
  any path of a locustfile, ``undocumented``, or a task's exception, ``loadtests.task_errors``;
  a waiting room's, a restock's or a tab's documented answer writes none); a 202 (``redis_lua``:
  accepted, written later) adds ``pending`` to its line, its id being the reservation's;
  the lifecycle's calls add ``<action> <outcome> <record id>`` (``loadtests.holds_calls``);
  and, beside them, every take's, pay's, cancel's, claim's and restock's request and
  answer in ``history-<pid>.jsonl`` (``loadtests.history_log``)
- ``LOADTEST_STAFF_TOKEN``: a token of staff with ``orders.change_voucher`` (the restock scenario)
- ``LOADTEST_WORKERS``: how many Locust processes share the tokens (default 1)
- ``LOADTEST_UNAVAILABLE_OK``: set (the fault runner) to take 503 ``unavailable`` with
  ``Retry-After`` as a documented answer (logged ``unavailable``): a dependency is down on
  purpose; and 503 ``unconfirmed`` likewise (``RESERVATIONS_WAIT_REPLICAS``: a reservation
  no replica confirmed in time), logged ``unconfirmed <reservation id>``: neither a
  confirmation nor a refusal. Without it a 503 fails the run, as below.
- ``LOADTEST_ANSWERS``: set to also log every answer's moment, status and seconds taken,
  ``<time> <status> <seconds>`` in ``answers-<pid>.txt`` beside the outcomes (status 0:
  no answer, the connection dropped)
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from pathlib import Path

from .history_log import history

# Every refusal a purchase or a draw may give, from docs/design.md ("HTTP API"). Anything else is a failure.
# Also 503 `unavailable`, documented for redis_lua when the item's Redis state is missing: a run
# loads that state before its crowd arrives, so under load a 503 means the state went missing,
# and it fails the run.
# A buyer who abandoned too many holds of the item, or one too lately, hears 409 `abandon_limit`
# or 429 `cooling_down` (docs/design.md, "Abandoned holds").
PURCHASE_REFUSALS = {
    409: {"sold_out", "already_purchased", "busy", "abandon_limit"},
    403: {"not_started", "ended"},
    429: {"cooling_down"},
}
DRAW_REFUSALS = {
    409: {"draw_limit", "pool_empty", "busy", "abandon_limit"},
    403: {"not_started", "ended"},
    429: {"cooling_down"},
}
# The statuses a 201 (written: settled, or held for its payment or claim when the item has a
# hold window) and a 202 (accepted, to be written by a worker) may say.
ANSWERED_STATUS = {201: ("confirmed", "held"), 202: ("pending",)}

# The outcomes that are not a refusal code.
CONFIRMED = "confirmed"  # a purchase: an order
WON = "won"  # a draw that won a prize
NO_PRIZE = "no_prize"  # a draw that won nothing, counted against the limit all the same
ERROR = "error"  # any undocumented answer, or an exception of a task (``loadtests.task_errors``)
# The last word of a 202's line: accepted, the record to be written later.
PENDING = "pending"
# A dependency down (503): documented, and accepted only under LOADTEST_UNAVAILABLE_OK.
UNAVAILABLE = "unavailable"
# A reservation made that no replica confirmed in time (503), accepted likewise: its message
# names it, "Reserved as <id>, ...".
UNCONFIRMED = "unconfirmed"
COME_BACK = {UNAVAILABLE, UNCONFIRMED}
# The prefix of the request names of open tabs polling the pages (``watched.py``): the
# runner leaves them out of the take's figures.
WATCH = "watch"
# The prefix of the request names of a waiting room's joins and polls (``queue_calls``): left
# out of the take's figures likewise.
QUEUE = "queue"
# Nothing left to take: a purchase's refusal, and a draw's.
OUT_OF_STOCK = {"sold_out", "pool_empty"}
# How often a process writes down that it was told nothing was left; the margin the audit
# gives a unit released just before that moment (``loadtests.lifecycle``) covers it.
OUT_OF_STOCK_EVERY = 0.25


def accepted(outcome: list[str]) -> bool:
    """Whether an outcome line (split into words) is a 202's."""
    return len(outcome) > 1 and outcome[-1] == PENDING


def env_path(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"Set {name} (see loadtests/common.py).")
    return Path(value)


def load_tokens() -> list[str]:
    lines = env_path("LOADTEST_TOKENS").read_text().split("\n")
    return [line.split()[1] for line in lines if line.strip()]


def env_id(name: str, what: str) -> int:
    value = os.environ.get(name, "")
    if not value.isdigit():
        raise RuntimeError(f"Set {name} to the id of {what}.")
    return int(value)


def voucher_id() -> int:
    return env_id("LOADTEST_VOUCHER", "the voucher to buy")


def pool_id() -> int:
    return env_id("LOADTEST_POOL", "the pool to draw from")


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
            if n < len(mine):
                return mine[n]
            if n == len(mine):
                outcomes.note_crowd_exhausted()
            return None


def hammer_token(environment, seat: int) -> str:
    """The token of the hammer's Locust user number ``seat`` (counted in this process).

    The first ``LOADTEST_BUYERS`` tokens are shared by this process's Locust users, in
    blocks of consecutive seats: one buyer's users start one after the other, so that
    when they all fire at once (``loadtests.barrier``) that buyer's requests reach the
    server together instead of interleaved with the other buyers'.
    """
    tokens = load_tokens()[: int(os.environ.get("LOADTEST_BUYERS", "3"))]
    users = getattr(environment.runner, "target_user_count", 0) if environment.runner else 0
    per_buyer = max(1, -(-users // len(tokens)))  # rounded up
    return tokens[(seat // per_buyer) % len(tokens)]


class OutcomeLog:
    """Appends every answer's outcome to a file of this process's own.

    The file is opened on first use, in the process that writes: ``locust
    --processes`` imports the locustfile once and then forks its workers, and a
    file opened at import would be shared by all of them.
    """

    def __init__(self) -> None:
        self._folder = os.environ.get("LOADTEST_OUTCOMES")
        self._file = None
        self._pid = 0
        self._answers_wanted = bool(os.environ.get("LOADTEST_ANSWERS"))
        self._answers = None
        self._answers_pid = 0
        self._out_of_stock_written = 0.0

    def add(self, outcome: str, *ids: int) -> None:
        if not self._folder:
            return
        if self._pid != os.getpid():
            Path(self._folder).mkdir(parents=True, exist_ok=True)
            self._file = open(Path(self._folder) / f"outcomes-{os.getpid()}.txt", "a", buffering=1)  # noqa: SIM115
            self._pid = os.getpid()
        self._file.write(" ".join([outcome, *map(str, ids)]) + "\n")

    def answered(self, status: int, started: float) -> None:
        """Log an answer's moment, status and seconds taken, under ``LOADTEST_ANSWERS``."""
        if not (self._folder and self._answers_wanted):
            return
        if self._answers_pid != os.getpid():
            Path(self._folder).mkdir(parents=True, exist_ok=True)
            self._answers = open(Path(self._folder) / f"answers-{os.getpid()}.txt", "a", buffering=1)  # noqa: SIM115
            self._answers_pid = os.getpid()
        now = time.time()
        self._answers.write(f"{now:.3f} {status} {now - started:.3f}\n")

    def note_out_of_stock(self) -> None:
        """Leaves the moment a buyer of this process was last told there was nothing left
        (``sold_out``, ``pool_empty``) in ``out-of-stock-<pid>``, a mark beside the
        outcomes as the crowd's is: units released before it, and still in stock at the
        end, were not sold again although buyers wanted them (the lifecycle's scenarios).
        Written at most every ``OUT_OF_STOCK_EVERY`` seconds, so the moment on file may
        trail the last by that much."""
        if not self._folder:
            return
        now = time.time()
        if now - self._out_of_stock_written < OUT_OF_STOCK_EVERY:
            return
        Path(self._folder).mkdir(parents=True, exist_ok=True)
        (Path(self._folder) / f"out-of-stock-{os.getpid()}").write_text(f"{now:.3f}\n")
        self._out_of_stock_written = now

    def note_crowd_exhausted(self) -> None:
        """Leaves a mark that this process dealt its last token before the run ended: its
        Locust users then idle, and req/s measures the crowd, not the server."""
        if self._folder:
            Path(self._folder).mkdir(parents=True, exist_ok=True)
            (Path(self._folder) / f"crowd-exhausted-{os.getpid()}").touch()


outcomes = OutcomeLog()


def read_outcomes(folder: Path) -> list[list[str]]:
    """Every outcome every Locust process logged in ``folder``, split into words."""
    return [line.split() for f in sorted(folder.glob("outcomes-*.txt")) for line in f.read_text().splitlines() if line]


def crowd_exhausted(folder: Path) -> bool:
    return any(folder.glob("crowd-exhausted-*"))


def last_out_of_stock(folder: Path) -> float | None:
    """The last moment (``time.time()``) any Locust process noted nothing left, or None."""
    moments = [float(path.read_text()) for path in folder.glob("out-of-stock-*") if path.read_text().strip()]
    return max(moments, default=None)


def json_object(response) -> dict | None:
    """The answer's JSON object; anything else is failed and logged as an error (None)."""
    try:
        body = response.json()
    except Exception:  # noqa: BLE001
        body = None
    if isinstance(body, dict):
        return body
    undocumented(response, f"not a JSON object: status {response.status_code}")
    return None


def undocumented(response, message: str) -> str:
    """An answer no document allows, on any path of a locustfile (a take, a pay, a waiting
    room's poll, a restock, an open tab's page): failed in Locust's report and logged
    ``error`` in the outcomes, which the verdict counts (``Result.failures``); ``ERROR``."""
    response.failure(message)
    outcomes.add(ERROR)
    return ERROR


def unavailable_ok(response, body: dict) -> bool:
    """Whether an answer is a 503 ``unavailable`` with ``Retry-After`` while the fault
    runner takes it as documented (``LOADTEST_UNAVAILABLE_OK``: a dependency down on purpose)."""
    return bool(
        response.status_code == 503
        and body.get("code") == UNAVAILABLE
        and response.headers.get("Retry-After")
        and os.environ.get("LOADTEST_UNAVAILABLE_OK")
    )


def _refused(response, body: dict, refusals: dict[int, set[str]]) -> str:
    """A documented refusal is a correct answer; anything else fails."""
    code = body.get("code")
    if code in refusals.get(response.status_code, ()):
        response.success()
        outcomes.add(code)
        if code in OUT_OF_STOCK:
            outcomes.note_out_of_stock()
        return code
    if code in COME_BACK and response.status_code == 503 and os.environ.get("LOADTEST_UNAVAILABLE_OK"):
        reserved = re.match(r"Reserved as (\d+)", str(body.get("message"))) if code == UNCONFIRMED else None
        if response.headers.get("Retry-After") and (code == UNAVAILABLE or reserved):
            response.success()
            outcomes.add(code, *([int(reserved[1])] if reserved else []))
            return code
        return undocumented(response, f"503 {code} without Retry-After or its reservation")
    return undocumented(response, f"unexpected answer {response.status_code} {body}")


def purchase(user, voucher: int, token: str, *, ticket: str | None = None) -> str:
    """POST the purchase and validate the answer; returns the outcome.

    A 201 (written) or a 202 (accepted, written later by a worker) must carry an order id
    and say ``confirmed`` or ``held`` (201) or ``pending`` (202) (logged for the audit, a 202
    marked ``pending``); a refusal must be one of the documented codes with its documented
    status. Anything else fails. ``ticket``: the waiting room's, sent as ``Admission-Ticket``.
    """
    return purchase_answer(user, voucher, token, ticket=ticket)[0]


def purchase_answer(user, voucher: int, token: str, *, ticket: str | None = None) -> tuple[str, dict | None]:
    """``purchase``, with the answer's body when it took a unit (None otherwise): the
    lifecycle's locustfiles go on from its order id and ``pay_by``."""
    started = time.time()
    headers = {"Authorization": f"Bearer {token}"}
    if ticket:
        headers["Admission-Ticket"] = ticket
    with user.client.post(
        f"/api/vouchers/{voucher}/purchase",
        headers=headers,
        name="/api/vouchers/[id]/purchase",
        catch_response=True,
    ) as response:
        outcomes.answered(response.status_code or 0, started)
        outcome, answer = _purchase_judged(response)
        # Inside the request's block, beside the outcome's line: a Locust stopping its users
        # may end one as the block closes, and the history keeps every answer the outcomes do.
        history.took("voucher", voucher, token, started, response.status_code or 0, outcome, answer)
    return outcome, answer


def _purchase_judged(response) -> tuple[str, dict | None]:
    body = json_object(response)
    if body is None:
        return ERROR, None
    if response.status_code in ANSWERED_STATUS:
        if isinstance(body.get("order_id"), int) and body.get("status") in ANSWERED_STATUS[response.status_code]:
            outcomes.add(CONFIRMED, body["order_id"], *_marks(response))
            response.success()
            return CONFIRMED, body
        return undocumented(response, f"malformed purchase {response.status_code} {body}"), None
    return _refused(response, body, PURCHASE_REFUSALS), None


def _marks(response) -> tuple[str, ...]:
    """What follows an accepted answer's ids on its line: ``pending`` for a 202."""
    return (PENDING,) if response.status_code == 202 else ()


def _is_prize(prize: object) -> bool:
    """A draw's prize as documented: null ("no prize") or ``{"id": int, "name": str}``."""
    return prize is None or (
        isinstance(prize, dict) and isinstance(prize.get("id"), int) and isinstance(prize.get("name"), str)
    )


def draw(user, pool: int, token: str) -> str:
    """POST one draw and validate the answer; returns the outcome.

    A 201 (written) or a 202 (accepted, written later by a worker) must carry a draw id,
    the prize (or null for "no prize"), the draws left and its status, ``confirmed`` or
    ``held`` (201) or ``pending`` (202) (logged for the audit as ``won <draw id> <prize id>``
    or ``no_prize <draw id>``, a 202's followed by ``pending``); a refusal must be one of
    the documented codes with its documented status. Anything else fails.
    """
    return draw_answer(user, pool, token)[0]


def draw_answer(user, pool: int, token: str) -> tuple[str, dict | None]:
    """``draw``, with the answer's body when it was recorded (None otherwise)."""
    started = time.time()
    with user.client.post(
        f"/api/pools/{pool}/draw",
        headers={"Authorization": f"Bearer {token}"},
        name="/api/pools/[id]/draw",
        catch_response=True,
    ) as response:
        outcomes.answered(response.status_code or 0, started)
        outcome, answer = _draw_judged(response)
        history.took("pool", pool, token, started, response.status_code or 0, outcome, answer)
    return outcome, answer


def _draw_judged(response) -> tuple[str, dict | None]:
    body = json_object(response)
    if body is None:
        return ERROR, None
    if response.status_code in ANSWERED_STATUS:
        draw_id, prize, draws_left = body.get("draw_id"), body.get("prize"), body.get("draws_left")
        if (
            isinstance(draw_id, int)
            and _is_prize(prize)
            and isinstance(draws_left, int)
            and draws_left >= 0
            and body.get("status") in ANSWERED_STATUS[response.status_code]
        ):
            response.success()
            if prize is None:
                outcomes.add(NO_PRIZE, draw_id, *_marks(response))
                return NO_PRIZE, body
            outcomes.add(WON, draw_id, prize["id"], *_marks(response))
            return WON, body
        return undocumented(response, f"malformed draw {response.status_code} {body}"), None
    return _refused(response, body, DRAW_REFUSALS), None
