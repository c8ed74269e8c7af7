"""Logging pieces the settings name in LOGGING: filters, and the formats of ``LOG_FORMAT``."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from .requestid import current


class ClientFault(logging.Filter):
    """A refusal of what a client sent (a body over the size limit, too many fields) on one
    line, as a warning: Django logs these as errors with the whole traceback, which says
    nothing about the server and buries the lines that do."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        request = getattr(record, "request", None)
        if request is not None:
            record.msg, record.args = f"{record.getMessage()} ({request.method} {request.path})", ()
        return True


class RequestId(logging.Filter):
    """Puts the current request's id (``core.requestid``) on every record as ``request_id``,
    unless the record names one itself: a worker writing many reservations in one batch
    logs each with the id of the request that made it. On the handler, so that records of
    every logger get it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "request_id" not in record.__dict__:
            record.request_id = current()
        return True


# One encoder for every line: json.dumps(..., default=str) builds a new one per call.
_encode = json.JSONEncoder(default=str).encode
# Every attribute a plain record has: anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "request_id", "rid"}


class Json(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601, milliseconds), ``level``,
    ``logger``, ``message``, ``request_id`` (null outside a request or task), every field
    given in ``extra=``, and ``exc_info`` with the traceback when there is one.

    Our own rather than python-json-logger: these few lines are all it would do here."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": record.__dict__.get("request_id"),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD:
                entry[key] = value
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack_info"] = self.formatStack(record.stack_info)
        return _encode(entry)


class Text(logging.Formatter):
    """``time level logger [request id] message`` for a terminal (``-`` outside a request)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(rid)s] %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.rid = record.__dict__.get("request_id") or "-"
        return super().formatMessage(record)
