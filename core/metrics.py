"""Prometheus metrics of the web processes: requests by route and status with their
durations, purchase and draw outcomes (each also logged, one line per outcome), and the
exposition at ``/metrics`` with who may read it.

Every label takes its values from a small closed set (the URL patterns, the statuses,
the strategies, the error codes), never from a path, a user or an id, so the number of
series stays fixed however much traffic comes.

Under gunicorn each worker process counts in files of its own
(``PROMETHEUS_MULTIPROC_DIR``, set by ``config/gunicorn.py`` before any worker starts)
and a scrape adds them up; without that directory (tests, ``runserver``) the process
counts in memory and a scrape reads it.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import time
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpResponse
from django.http.request import split_domain_port, validate_host
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.multiprocess import MultiProcessCollector

from .errors import DomainError

# A "_created" series beside every counter and histogram doubles what a scrape carries, for
# a start time that Prometheus reads from the counters' resets anyway.
disable_created_metrics()

REQUESTS = Counter(
    "flashsale_http_requests_total",
    "HTTP requests answered, by method, route (the URL pattern, not the path) and status.",
    ["method", "route", "status"],
)
REQUEST_SECONDS = Histogram(
    "flashsale_http_request_duration_seconds",
    "Seconds from a request reaching Django until its response was ready, by method and route.",
    ["method", "route"],
    buckets=(0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
PURCHASES = Counter(
    "flashsale_purchases_total",
    "Purchases by the voucher's strategy and outcome: the order's status (confirmed, pending) "
    "or the refusal's code (sold_out, already_purchased, busy, not_started, ended, unavailable, ...).",
    ["strategy", "outcome"],
)
DRAWS = Counter(
    "flashsale_draws_total",
    "Draws by the pool's strategy and outcome: the draw's status (confirmed, pending) or the "
    "refusal's code (draw_limit, pool_empty, busy, not_started, ended, unavailable, ...).",
    ["strategy", "outcome"],
)

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Children:
    """A labelled family's children, bound once per set of label values.

    ``family.labels(...)`` checks, converts and looks its arguments up under a lock on
    every call; on the request path that was most of the cost of counting. The values come
    from closed sets (see the module), so this dictionary stays small. Two threads binding
    the same values at once get the same child from the family: the race is harmless.
    """

    __slots__ = ("bound", "family")

    def __init__(self, family) -> None:
        self.family = family
        self.bound: dict[tuple, object] = {}

    def __call__(self, *values):
        child = self.bound.get(values)
        if child is None:
            child = self.bound[values] = self.family.labels(*values)
        return child


_requests = Children(REQUESTS)
_request_seconds = Children(REQUEST_SECONDS)
_purchases = Children(PURCHASES)
_draws = Children(DRAWS)


def request_route(request) -> str:
    """The URL pattern that answered (``api/vouchers/<int:voucher_id>/purchase``), ``static``
    for a static file, or ``unmatched`` for a path no pattern took."""
    match = request.resolver_match
    if match is not None:
        return match.route or match.view_name or "unnamed"
    if request.path_info.startswith(_static_prefix()):
        return "static"
    return "unmatched"


@lru_cache(maxsize=1)
def _static_prefix() -> str:
    return "/" + settings.STATIC_URL.lstrip("/")


class RequestMetricsMiddleware:
    """Counts every response by route and status and times it. First in ``MIDDLEWARE``, so
    that the time includes every other middleware; off with ``METRICS_ENABLED``.

    ``answers`` maps a path to a view this middleware answers itself, ahead of every other
    (a subclass fills it, as ``config.metrics`` does with ``/metrics``).
    """

    answers: dict = {}

    def __init__(self, get_response) -> None:
        if not settings.METRICS_ENABLED:
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        answer = self.answers.get(request.path_info)
        if answer is not None:
            response = answer(request)
            route = request.path_info.lstrip("/")
        else:
            response = self.get_response(request)
            route = request_route(request)
        method = request.method if request.method in METHODS else "other"
        _requests(method, route, response.status_code).inc()
        _request_seconds(method, route).observe(time.perf_counter() - started)
        return response


class Outcome:
    """One purchase or draw, once its outcome is known: the status of what the service
    returned, passed through ``counted(result)``, or the code of the domain error it raised
    (``error`` for anything else, which answers 500). Counted (``METRICS_ENABLED``) and
    logged: one INFO line with the strategy, the item, the user, the outcome, the id
    answered (``order_id``, ``draw_id``; null for a refusal) and the milliseconds from
    entering the block (the request's id comes with it, through the logging filter)."""

    __slots__ = (
        "children",
        "event",
        "id_field",
        "item_id",
        "kind",
        "logger",
        "outcome",
        "record_id",
        "started",
        "strategy",
        "user_id",
    )

    def __init__(
        self,
        children: Children,
        strategy: str,
        *,
        event: str,
        kind: str,
        id_field: str,
        item_id: int | None,
        user_id: int | None,
    ) -> None:
        self.children = children
        self.strategy = strategy
        self.outcome = "error"
        self.event = event
        self.logger = _outcome_loggers[event]
        self.kind = kind
        self.id_field = id_field
        self.item_id = item_id
        self.user_id = user_id
        self.record_id = None
        self.started = 0.0

    def __enter__(self) -> Outcome:
        self.started = time.perf_counter()
        return self

    def __call__(self, result):
        self.outcome = result.status
        self.record_id = getattr(result, "public_id", None)
        return result

    def __exit__(self, exc_type, exc, traceback) -> None:
        outcome = exc.code if isinstance(exc, DomainError) else self.outcome if exc is None else "error"
        if settings.METRICS_ENABLED:
            self.children(self.strategy, outcome).inc()
        if self.logger.isEnabledFor(logging.INFO):
            ms = round((time.perf_counter() - self.started) * 1000, 3)
            self.logger.info(
                "%s of %s %s by user %s under %s: %s in %.1f ms",
                self.event, self.kind, self.item_id, self.user_id, self.strategy, outcome, ms,
                extra={
                    "event": self.event, "strategy": self.strategy, "kind": self.kind, "item_id": self.item_id,
                    "user_id": self.user_id, "outcome": outcome, self.id_field: self.record_id, "ms": ms,
                },
            )  # fmt: skip


# By product, so that either can be kept or silenced on its own.
_outcome_loggers = {"purchase": logging.getLogger("orders.purchase"), "draw": logging.getLogger("lottery.draw")}


def purchase_counted(strategy: str, *, voucher_id: int | None = None, user_id: int | None = None) -> Outcome:
    """``with purchase_counted(voucher.strategy, voucher_id=..., user_id=...) as counted:
    order = counted(item_take(VOUCHER, voucher, ...))``, as every purchase, the API's and the
    page's, enters the take (``inventory.api.TakeCall``)."""
    return Outcome(
        _purchases, strategy, event="purchase", kind="voucher", id_field="order_id", item_id=voucher_id, user_id=user_id
    )


def draw_counted(strategy: str, *, pool_id: int | None = None, user_id: int | None = None) -> Outcome:
    """``with draw_counted(pool.strategy, pool_id=..., user_id=...) as counted: draw =
    counted(item_take(POOL, pool, ...))``, as a purchase (:func:`purchase_counted`)."""
    return Outcome(_draws, strategy, event="draw", kind="pool", id_field="draw_id", item_id=pool_id, user_id=user_id)


# -- who may read them -----------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _networks(allowed: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(network, strict=False) for network in allowed)


def metrics_refusal(request) -> HttpResponse | None:
    """None when the caller may read the metrics, else the answer that refuses it.

    With ``METRICS_TOKEN`` set, only ``Authorization: Bearer <token>`` opens them, from
    anywhere (compared in constant time). Without it, only a caller whose own address
    (``REMOTE_ADDR``) is in ``METRICS_ALLOWED_NETWORKS`` (loopback and private networks
    by default) and who did not come through a proxy: behind nginx every request arrives
    from the proxy's private address, so a request carrying ``X-Forwarded-For`` or
    ``Forwarded`` was sent from somewhere else and is refused. And only for a Host the
    site answers (``ALLOWED_HOSTS``) or an address, which a scraper sends when it finds
    each replica by address: a page of another site whose name was rebound to this
    server (DNS rebinding) reads from inside the network, with its own name as Host.
    """
    token = settings.METRICS_TOKEN
    if token:
        scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            return None
        refused = HttpResponse("Send 'Authorization: Bearer <METRICS_TOKEN>'.\n", status=401, content_type="text/plain")
        refused["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return refused
    if not _host_answered(request):
        return HttpResponse("Unknown host.\n", status=400, content_type="text/plain")
    if "HTTP_X_FORWARDED_FOR" not in request.META and "HTTP_FORWARDED" not in request.META:
        try:
            address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
        except ValueError:
            address = None
        if address is not None:
            address = getattr(address, "ipv4_mapped", None) or address
            if any(address in network for network in _networks(tuple(settings.METRICS_ALLOWED_NETWORKS))):
                return None
    return HttpResponse(
        "Metrics are served to loopback and private addresses only, or with METRICS_TOKEN.\n",
        status=403,
        content_type="text/plain",
    )


def _host_answered(request) -> bool:
    """The Host is one the site answers, or an address (a scraper's, by replica)."""
    domain, _ = split_domain_port(request.META.get("HTTP_HOST") or request.META.get("SERVER_NAME", ""))
    if not domain:
        return False
    try:
        ipaddress.ip_address(domain.strip("[]"))
    except ValueError:
        return validate_host(domain, settings.ALLOWED_HOSTS)
    return True


# -- exposition ------------------------------------------------------------------------------------


class ProcessFiles:
    """What every process of the server counted: the files in ``directory`` (gunicorn's
    workers, dead ones included, so that counts never go back) and in its subdirectories
    (other processes of the same run that count beside them, such as ``make run``'s Celery
    worker, whose own start cleans its subdirectory)."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)

    def collect(self):
        files = [str(path) for pattern in ("*.db", "*/*.db") for path in self.directory.glob(pattern)]
        return MultiProcessCollector.merge(files, accumulate=True)


@lru_cache(maxsize=4)
def _process_registry(directory: str | None) -> CollectorRegistry:
    if directory is None:
        return REGISTRY
    registry = CollectorRegistry()
    registry.register(ProcessFiles(directory))
    return registry


def exposition(*collectors) -> tuple[bytes, str]:
    """The text format of every process's metrics and of ``collectors`` (read at scrape
    time, such as the reservations' backlog), and its content type: version 0.0.4, which
    every Prometheus reads (the library's latest, 1.0.0, only Prometheus 3)."""
    registry = _process_registry(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None)
    extra = CollectorRegistry()
    for collector in collectors:
        extra.register(collector)
    return generate_latest(registry) + generate_latest(extra), CONTENT_TYPE_PLAIN_0_0_4
