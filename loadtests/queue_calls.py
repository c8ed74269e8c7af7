"""A buyer through an item's waiting room (docs/api.md, "Waiting room"): join its queue, poll it
until admitted (or told it is sold out, or closed), and hand the ticket to the take. Each
buyer's passage is logged beside the outcomes, in ``admissions-<pid>.txt``, for the run's
fairness figures (``loadtests.admissions``): when the join was sent and answered, the
ticket's serial (the order of admission), and when the admission was seen.

The join and the poll are named with ``QUEUE`` first, so that the run's figures of the take
(its endpoint's latencies) leave them out, as they leave out the open tabs' polls. A documented
answer writes no outcome line; an undocumented one (a 500, a 429, a 404, an admission with a
ticket of another form, no answer at all) is logged ``error`` as a take's is
(``common.undocumented``), which the verdict counts, and its buyer's passage ``error``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import gevent

from .common import QUEUE, UNAVAILABLE, json_object, unavailable_ok, undocumented

# How long a waiting buyer waits before asking again when the answer does not say
# (``poll_after_seconds``, the room's own rule).
POLL_SECONDS = 1.0
# What a join or a poll answers 200 with (docs/api.md, "Waiting room").
STANDINGS = {"waiting", "admitted", "sold_out", "closed"}


def poll_after(standing: dict) -> float:
    return float(standing.get("poll_after_seconds") or POLL_SECONDS)


class AdmissionLog:
    """Appends each buyer's passage to a file of this process's own (opened in the process
    that writes, as ``common.OutcomeLog`` does)."""

    def __init__(self) -> None:
        self._folder = os.environ.get("LOADTEST_OUTCOMES")
        self._file = None
        self._pid = 0

    def add(self, sent: float, answered: float, serial: int | None, seen: float | None, status: str) -> None:
        if not self._folder:
            return
        if self._pid != os.getpid():
            Path(self._folder).mkdir(parents=True, exist_ok=True)
            self._file = open(Path(self._folder) / f"admissions-{os.getpid()}.txt", "a", buffering=1)  # noqa: SIM115
            self._pid = os.getpid()
        self._file.write(f"{sent:.4f} {answered:.4f} {serial if serial is not None else '-'} ")
        self._file.write(f"{f'{seen:.4f}' if seen is not None else '-'} {status}\n")


admissions = AdmissionLog()


def ticket_serial(ticket: object) -> int | None:
    """The order of admission a ticket names (``<kind>.<item>.<user>.<serial>.<deadline>.<mac>``),
    or None for a ticket of another form."""
    fields = ticket.split(".") if isinstance(ticket, str) else []
    return int(fields[3]) if len(fields) > 3 and fields[3].isdigit() else None


def _documented(body: dict) -> bool:
    """A standing as the room answers it: an admission with a ticket that names its serial, or
    none (an ``open`` item admits without one)."""
    if body.get("status") not in STANDINGS:
        return False
    return body["status"] != "admitted" or body.get("ticket") is None or ticket_serial(body["ticket"]) is not None


def _standing(user, method: str, voucher: int, token: str) -> dict | None:
    """The buyer's standing, as a join (POST) or a poll (GET) answers it; ``{"status":
    "unavailable", ...}`` for a 503 to ask again after (the fault runner's); None, logged
    ``error``, for any other answer."""
    with user.client.request(
        method,
        f"/api/vouchers/{voucher}/queue",
        headers={"Authorization": f"Bearer {token}"},
        name=f"{QUEUE} {method} /api/vouchers/[id]/queue",
        catch_response=True,
    ) as response:
        body = json_object(response)
        if body is None:
            return None
        if response.status_code == 200 and _documented(body):
            response.success()
            return body
        if unavailable_ok(response, body):
            response.success()
            return {"status": UNAVAILABLE, "poll_after_seconds": float(response.headers["Retry-After"])}
        # Nothing else is documented for a buyer who joins once and polls when told: 404
        # ``not_queued`` comes before a join, or once a ticket was used or lapsed, after the
        # buyer stopped polling; 429 ``rate_limited`` only with the rate limits that the
        # runner's server turns off (harness.server), as a take's 429 is an error
        # (``common.PURCHASE_REFUSALS``); and a 500 or no answer never is.
        undocumented(response, f"queue {method} answered {response.status_code} {body}")
        return None


def _asked(user, method: str, voucher: int, token: str) -> dict | None:
    """``_standing``, asked again after its ``Retry-After`` while the room's dependency is down
    (a join that was not made is made again, not polled)."""
    standing = _standing(user, method, voucher, token)
    while standing is not None and standing["status"] == UNAVAILABLE:
        gevent.sleep(poll_after(standing))
        standing = _standing(user, method, voucher, token)
    return standing


def queue_through(user, voucher: int, token: str) -> str | None:
    """The buyer of ``token`` joins the voucher's queue and waits: the ticket once admitted;
    None when told sold out or closed, or when the queue answered something undocumented
    (logged ``error``, and the passage too)."""
    sent = time.time()
    standing = _asked(user, "POST", voucher, token)
    answered = time.time()
    while standing is not None and standing["status"] == "waiting":
        gevent.sleep(poll_after(standing))
        standing = _asked(user, "GET", voucher, token)
    if standing is None:
        admissions.add(sent, answered, None, None, "error")
        return None
    if standing["status"] != "admitted":
        admissions.add(sent, answered, None, None, standing["status"])
        return None
    ticket = standing.get("ticket")
    admissions.add(sent, answered, ticket_serial(ticket), time.time(), "admitted")
    return ticket
