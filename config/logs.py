"""The logging configuration of every process: web, Celery's worker and its beat, in the
format and at the level the settings choose (``config.settings.base``: ``LOG_FORMAT``,
``LOG_LEVEL``)."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured


def logging_config(*, log_format: str, level: str) -> dict:
    """``LOGGING`` for ``log_format``: ``text`` (a line a person reads: time, level, logger,
    [request id], message) or ``json`` (one object per line, with the request id and every
    field a line was given: core.logfilters.Json), at ``level`` for every logger without
    its own. Web processes, Celery's worker and its beat all log through it (config.celery)."""
    if log_format not in ("text", "json"):
        raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, got {log_format!r}")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "text": {"()": "core.logfilters.Text"},
            "json": {"()": "core.logfilters.Json"},
        },
        "filters": {
            # Every line carries the id of the request or task it was written for (core.requestid).
            "request_id": {"()": "core.logfilters.RequestId"},
            # What Django refuses of a request body (413, or 400 for too many fields) is the
            # client's fault: one line each, without the traceback Django adds.
            "client_fault": {"()": "core.logfilters.ClientFault"},
            # A 503 while a dependency is down: core.outage has said why, once in a while.
            "not_unavailable": {"()": "core.outage.NotUnavailable"},
        },
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": log_format, "filters": ["request_id"]}},
        # INFO: one line per purchase and draw outcome, per lock taken and released, and per
        # reservation written; WARNING keeps only what went wrong.
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # A refused purchase (409 sold out, 403 not started) is business as usual in a flash
            # sale, not a warning: log server errors only.
            "django.request": {"level": "ERROR", "filters": ["not_unavailable"]},
            **{
                f"django.security.{name}": {"filters": ["client_fault"]}
                for name in ("RequestDataTooBig", "TooManyFieldsSent", "TooManyFilesSent")
            },
            # The locks' lines (locking.LockLog): acquired, refused and released at INFO, lost
            # leases, failed renewals and stale fences at WARNING.
            "locking": {"level": os.environ.get("LOCK_LOG_LEVEL") or "NOTSET"},
            # Celery's own INFO is a line per task received and succeeded, several a second
            # with the beat's sweeps alone.
            "celery": {"level": os.environ.get("CELERY_LOG_LEVEL") or "WARNING"},
        },
    }
