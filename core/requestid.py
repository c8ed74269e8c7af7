"""The request id: one per HTTP request, on every log line the request causes, here and in
the Celery tasks it sends (``config.celery`` carries it in the task's headers), and in a
``redis_lua`` reservation's stream entry until a worker writes its row.

It is taken from the request's ``X-Request-ID`` when that is sane (a proxy or a client that
already named the request), else made here, and sent back in the response's
``X-Request-ID``. It correlates log lines and nothing else: a client may choose its own, so
no decision is ever made on it.
"""

from __future__ import annotations

import os
import re
from contextvars import ContextVar, Token

from django.core.signals import request_finished

# A contextvar, not a thread-local: each thread (gunicorn's, the test client's) and each
# asyncio task sees its own, and locking's watchdog runs a lock's hooks in the context of
# the code that acquired it.
_current: ContextVar[str | None] = ContextVar("request_id", default=None)

HEADER = "X-Request-ID"
META_KEY = "HTTP_X_REQUEST_ID"
# What an id may be: bounded, and only characters that need no quoting in a log line or a
# header (a UUID with or without dashes, a W3C traceparent, nginx's $request_id all are).
MAX_LENGTH = 128
_sane = re.compile(rf"[A-Za-z0-9._:-]{{1,{MAX_LENGTH}}}").fullmatch


def current() -> str | None:
    """The id of the request (or task) this code runs for; None outside one."""
    return _current.get()


def new() -> str:
    """A fresh id: 128 random bits in hex, as nginx's ``$request_id``."""
    return os.urandom(16).hex()


def sane(value: object) -> str | None:
    """``value`` when it may serve as a request id, else None."""
    if isinstance(value, str) and _sane(value):
        return value
    return None


def bind(request_id: str | None) -> Token:
    """Make ``request_id`` the current id; undo with :func:`unbind` and the token."""
    return _current.set(request_id)


def unbind(token: Token) -> None:
    _current.reset(token)


class RequestIdMiddleware:
    """Binds the request's id for everything it runs (every log line carries it, through
    ``core.logfilters.RequestId``) and answers it in ``X-Request-ID``; ``request.request_id``
    holds it too. Early in ``MIDDLEWARE``, so that the other middleware's lines have it.

    The id stays bound until the response is closed (``request_finished``), not only while
    the middleware runs: Django logs a server error it was answered after every middleware
    has returned. The next request binds its own either way."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        given = request.META.get(META_KEY)
        request_id = given if given is not None and _sane(given) else new()
        request.request_id = request_id
        _current.set(request_id)
        response = self.get_response(request)
        response[HEADER] = request_id
        return response


def _unbind_at_end(**kwargs) -> None:
    _current.set(None)


request_finished.connect(_unbind_at_end, dispatch_uid="core.requestid.unbind")
