"""A buyer through an item's waiting room (docs/api.md, "Waiting room"): join its queue, poll it
until admitted (or told it is sold out, or closed), and hand the ticket to the take. Each
buyer's passage is logged beside the outcomes, in ``admissions-<pid>.txt``, for the run's
fairness figures (``loadtests.admissions``): when the join was sent and answered, the
ticket's serial (the order of admission), and when the admission was seen.

The join and the poll are named with ``QUEUE`` first, so that the run's figures of the take
(its endpoint's latencies) leave them out, as they leave out the open tabs' polls.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import gevent

from .common import QUEUE, json_object

# How long a waiting buyer waits before asking again when the answer does not say
# (``poll_after_seconds``, the room's own rule).
POLL_SECONDS = 1.0


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


def _standing(user, method: str, voucher: int, token: str) -> dict | None:
    with user.client.request(
        method,
        f"/api/vouchers/{voucher}/queue",
        headers={"Authorization": f"Bearer {token}"},
        name=f"{QUEUE} {method} /api/vouchers/[id]/queue",
        catch_response=True,
    ) as response:
        body = json_object(response)
        if response.status_code != 200 or body is None or "status" not in body:
            response.failure(f"queue {method} answered {response.status_code}")
            return None
        response.success()
        return body


def queue_through(user, voucher: int, token: str) -> str | None:
    """The buyer of ``token`` joins the voucher's queue and waits: the ticket once admitted;
    None when told sold out or closed, or when the queue answered something undocumented."""
    sent = time.time()
    standing = _standing(user, "POST", voucher, token)
    answered = time.time()
    while standing is not None and standing["status"] == "waiting":
        gevent.sleep(poll_after(standing))
        standing = _standing(user, "GET", voucher, token)
    if standing is None:
        admissions.add(sent, answered, None, None, "error")
        return None
    if standing["status"] != "admitted":
        admissions.add(sent, answered, None, None, standing["status"])
        return None
    ticket = standing.get("ticket")
    serial = int(ticket.split(".")[3]) if ticket else None
    admissions.add(sent, answered, serial, time.time(), "admitted")
    return ticket
