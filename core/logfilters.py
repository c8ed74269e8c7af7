"""Logging pieces the settings name in LOGGING."""

from __future__ import annotations

import logging


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
