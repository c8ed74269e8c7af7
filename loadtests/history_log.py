"""The history a Locust process keeps of the requests it sent that take or change stock: a
take (a purchase, a draw), a pay, a cancel, a claim, and a restock by staff, one JSON line
each in ``history-<pid>.jsonl`` beside the outcomes (``LOADTEST_OUTCOMES``), appended once
the answer came (or did not):

    {"start": 1.2, "end": 1.3, "user": 17, "action": "take", "kind": "voucher", "item": 5,
     "status": 201, "code": "held", "record": 913}

``start`` and ``end`` are ``time.time()`` before the request and after its answer; ``user``
the user id the bearer token signs; ``kind`` and ``item`` the voucher or pool (a pay's,
cancel's or claim's item is the one the run's locustfile serves); ``status`` the HTTP status
(0: no answer); ``code`` what the answer said: an accepted take's or change's status word
(``confirmed``, ``held``, ``pending``, ``paid``, ``accepted``, ...), a refusal's code, or
``error``; ``record`` the order, draw or reservation id the answer names (a pay's, cancel's or
claim's: the record it was sent for), else null. A draw that won adds ``prize``, a restock
its ``units``. ``loadtests.history`` checks it against the database.

No request is added and nothing is looked up: the user id is read from the token itself,
and each line is one write of a line-buffered file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

TAKE, RESTOCK = "take", "restock"
# One per Locust process, named by its pid.
HISTORY_GLOB = "history-[0-9]*.jsonl"


def token_user(token: str) -> int | None:
    """The user id a bearer token signs (``accounts.tokens.token_new``:
    ``<user id>.<end>.<stamp>.<nonce>:<signature>``); None for a token of another form."""
    head = token.split(".", 1)[0]
    return int(head) if head.isdigit() else None


class HistoryLog:
    """Appends one line per request to a file of this process's own, opened on first use in
    the process that writes (``locust --processes`` forks after importing the locustfile)."""

    def __init__(self) -> None:
        self._folder = os.environ.get("LOADTEST_OUTCOMES")
        self._file = None
        self._pid = 0

    @property
    def kept(self) -> bool:
        """Whether this process keeps a history (``LOADTEST_OUTCOMES`` names a folder)."""
        return bool(self._folder)

    def add(
        self,
        *,
        start: float,
        action: str,
        kind: str,
        item: int,
        token: str,
        status: int,
        code: str | None,
        record: int | None = None,
        **more: int,
    ) -> None:
        if not self.kept:
            return
        end = time.time()
        if self._pid != os.getpid():
            Path(self._folder).mkdir(parents=True, exist_ok=True)
            self._file = open(Path(self._folder) / f"history-{os.getpid()}.jsonl", "a", buffering=1)  # noqa: SIM115
            self._pid = os.getpid()
        line = {
            "start": round(start, 4), "end": round(end, 4), "user": token_user(token), "action": action,
            "kind": kind, "item": item, "status": status, "code": code, "record": record, **more,
        }  # fmt: skip
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")

    def took(
        self, kind: str, item: int, token: str, start: float, status: int, outcome: str, answer: dict | None
    ) -> None:
        """A take's line: ``answer`` is the body of one that took (None otherwise)."""
        if answer is None:
            self.add(start=start, action=TAKE, kind=kind, item=item, token=token, status=status, code=outcome)
            return
        record = answer.get("order_id", answer.get("draw_id"))
        prize = answer.get("prize")
        more = {"prize": prize["id"]} if isinstance(prize, dict) else {}
        self.add(
            start=start, action=TAKE, kind=kind, item=item, token=token, status=status,
            code=answer.get("status"), record=record, **more,
        )  # fmt: skip


history = HistoryLog()


def history_lines(folder: Path) -> Iterator[str]:
    """Every line of every Locust process's history in ``folder``."""
    for path in sorted(folder.glob(HISTORY_GLOB)):
        yield from (line for line in path.read_text().splitlines() if line.strip())
