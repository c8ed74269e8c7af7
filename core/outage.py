"""A dependency out of reach: which one an exception says is down, and the 503 it answers.

A request that finds Redis, the database or the broker unreachable answers 503
``unavailable`` with ``Retry-After``, never a 500: the client did nothing wrong, and the
same request may be sent again once the dependency answers. The API's handler
(``config/api.py``) answers it in the API's error shape; every other page goes through
``server_error``, the site's ``handler500``, which answers the 503 page instead of the 500
one. Every client of those dependencies has timeouts (``locking.integration.
locks_redis``, the cache's options, the database's connect timeout), so that the answer
comes within seconds instead of hanging.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator

import redis
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults

from .errors import Unavailable

# MySQL and MariaDB client and server errors that mean the server cannot be reached or the
# connection was lost: 1040 too many connections, 1053 server shutting down, 1927 connection
# killed, 2002/2003 cannot connect, 2005 unknown host, 2006 gone away, 2013/2055 lost during
# a query, 4031 disconnected for inactivity. Deadlocks and lock wait timeouts are
# OperationalErrors too, but a request's own business (``contended``): a take answers them
# ``busy``, anything else a 500, logged.
DATABASE_UNREACHABLE = {1040, 1053, 1927, 2002, 2003, 2005, 2006, 2013, 2055, 4031}
# Of those, the ones that cut a connection already open: a statement sent on it, a COMMIT
# among them, may have been carried out with its answer lost.
DATABASE_CUT = {1053, 1927, 2006, 2013, 2055, 4031}


logger = logging.getLogger(__name__)

# A dependency down fails every request for as long as it is down: one warning per
# dependency and process this often is enough to say so without flooding the log.
WARN_EVERY_SECONDS = 10.0
_warned_at: dict[str, float] = {}


class DependencyDown(Unavailable):
    """A dependency did not answer. A write cut off on its way may still have been made
    (a COMMIT whose answer was lost); the unique keys make the retried request find it
    (``already_purchased``, the draw counted) instead of taking stock twice."""

    default_message = "A service this request needs does not answer; try again shortly."

    def __init__(self, dependency: str) -> None:
        super().__init__(f"The {dependency} does not answer; try again shortly.")
        self.dependency = dependency


def dependency_down(exc: BaseException) -> str | None:
    """``"redis"``, ``"database"`` or ``"broker"`` when ``exc`` (or what it was raised
    from) says that dependency is out of reach; None for any other error."""
    for cause in _causes(exc):
        # A Redis full under noeviction refuses writes, and nothing was written: as if down.
        if isinstance(cause, redis.ConnectionError | redis.TimeoutError | redis.exceptions.OutOfMemoryError):
            return "redis"
        if _database_unreachable(cause):
            return "database"
        if _broker_unreachable(cause):
            return "broker"
    return None


def _causes(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc``, then what it was raised from, and so on (each once: a chain may loop)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


class MadeUnanswered(Exception):
    """Raised from what stopped the answer to a take already made (a ``redis_lua``
    reservation, its prize's name then unread): whatever the request answers, the take stands,
    and the same request sent again must not make another."""


def outcome_unknown(exc: BaseException | None) -> bool:
    """Whether the request that failed with ``exc`` may have done what it asked all the same:
    a take made before its answer failed (``MadeUnanswered``), a database connection cut in
    use (``database_cut``), or a Redis that timed out waiting for a script's answer."""
    return any(
        isinstance(cause, MadeUnanswered)
        or (isinstance(cause, redis.TimeoutError) and not _connecting(cause))
        or _cut(cause)
        for cause in _causes(exc)
    )


def database_cut(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it was raised from) is a database connection cut while in use
    (``DATABASE_CUT``), so that what it last sent, a COMMIT say, may have been done."""
    return any(_cut(cause) for cause in _causes(exc))


def _cut(exc: BaseException) -> bool:
    return isinstance(exc, OperationalError) and bool(exc.args) and exc.args[0] in DATABASE_CUT and not _connecting(exc)


def _connecting(exc: BaseException) -> bool:
    """Whether the error came while opening the connection, before anything was sent: redis-py
    says so in its message ("Timeout connecting to server"), as MySQL's client does for a
    connection lost at its handshake ("reading initial communication packet")."""
    text = str(exc)
    return "connecting" in text or "initial communication packet" in text


# A transaction refused for contention, not for what it asked, and rolled back whole: the
# victim of a deadlock (1213), or a wait for a row's lock past ``innodb_lock_wait_timeout``
# (1205). Sent again, it may go through.
DATABASE_CONTENDED = {1205, 1213}


def contended(exc: BaseException) -> bool:
    """Whether ``exc`` is a transaction lost to a deadlock or a lock wait (``DATABASE_CONTENDED``)."""
    return isinstance(exc, OperationalError) and bool(exc.args) and exc.args[0] in DATABASE_CONTENDED


def database_unreachable(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it was raised from) says the database cannot be reached,
    rather than that it refused (a deadlock, a lock wait, a constraint)."""
    return any(_database_unreachable(cause) for cause in _causes(exc))


def _database_unreachable(exc: BaseException) -> bool:
    if isinstance(exc, InterfaceError):  # a connection already closed under the request
        return True
    return isinstance(exc, OperationalError) and bool(exc.args) and exc.args[0] in DATABASE_UNREACHABLE


def _broker_unreachable(exc: BaseException) -> bool:
    try:
        from kombu.exceptions import OperationalError as BrokerError
    except ImportError:  # pragma: no cover  (celery is a dependency)
        return False
    return isinstance(exc, BrokerError)


def dependency_down_noted(dependency: str, exc: BaseException, where: str) -> None:
    """Log that ``dependency`` does not answer, at most once per ``WARN_EVERY_SECONDS``."""
    now = time.monotonic()
    if now - _warned_at.get(dependency, -WARN_EVERY_SECONDS) >= WARN_EVERY_SECONDS:
        _warned_at[dependency] = now
        logger.warning("%s: the %s does not answer (%r); answering 503 meanwhile", where, dependency, exc)


class NotUnavailable(logging.Filter):
    """Leaves out Django's "Service Unavailable" line for each 503: while a dependency is
    down every request answers one, and ``dependency_down_noted`` has said why."""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "status_code", None) != 503


# What the 503 page calls each dependency.
SERVICE_NAMES = {"database": "the database", "redis": "Redis", "broker": "the task queue"}


def server_error(request, template_name: str = defaults.ERROR_500_TEMPLATE_NAME) -> HttpResponse:
    """The site's ``handler500``: Django's 500 page, unless what failed is a dependency out
    of reach; then 503 with ``Retry-After``, the ``503.html`` page (JSON in the API's
    error shape under ``/api/``, for what failed outside the API's own handler).

    Django calls it while it handles the exception, so ``sys.exc_info()`` is that
    exception. The page is rendered as the 500 page is, with no request and no context
    processor: the user, the session and the database may be what is down.
    """
    exc = sys.exc_info()[1]
    dependency = dependency_down(exc) if exc is not None else None
    if dependency is None:
        return defaults.server_error(request, template_name)
    dependency_down_noted(dependency, exc, f"{request.method} {request.path}")
    down = DependencyDown(dependency)
    if request.path.startswith("/api/"):
        response = JsonResponse({"code": down.code, "message": down.message}, status=down.status)
    else:
        page = loader.get_template("503.html").render({"service": SERVICE_NAMES.get(dependency, dependency)})
        response = HttpResponse(page, status=down.status)
    response["Retry-After"] = str(down.retry_after)
    return response
