"""``/metrics``: every process's counters (``core.metrics``, ``inventory.metrics``) and, read
at scrape time, the backlog of ``redis_lua``'s reservations per kind of item; and the
middleware that counts requests and answers ``/metrics``."""

from __future__ import annotations

import logging

import redis
from django.conf import settings
from django.db import DatabaseError
from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client.core import GaugeMetricFamily

from core.metrics import RequestMetricsMiddleware, exposition, metrics_refusal
from inventory.items import items_live
from inventory.product import products
from inventory.redis_lua.backlog import reservations_backlog
from inventory.redis_lua.client import reservations_client

logger = logging.getLogger(__name__)


class ReservationsCollector:
    """How many reservations wait to be written and how long the oldest has waited, per
    kind (voucher, pool), over the live ``redis_lua`` items only: two indexed queries and
    one Redis round trip per scrape, whatever the traffic."""

    def describe(self):
        # Known names without running collect() at registration (which would query).
        return []

    def collect(self):
        items = GaugeMetricFamily(
            "flashsale_reservations_items", "Live redis_lua items (sale not ended), by kind.", labels=["kind"]
        )
        pending = GaugeMetricFamily(
            "flashsale_reservations_pending",
            "Reservations answered 202 and not yet written to the database, by kind.",
            labels=["kind"],
        )
        lag = GaugeMetricFamily(
            "flashsale_reservations_oldest_pending_seconds",
            "How long the oldest reservation not yet written has waited (0 with none), by kind.",
            labels=["kind"],
        )
        up = GaugeMetricFamily(
            "flashsale_reservations_scrape_ok", "1 when the backlog above could be read (database and Redis)."
        )
        try:
            groups = {
                product.kind: list(items_live(product).values_list(product.group_field, flat=True))
                for product in products()
            }
            reservations = reservations_client()
            for kind, group_ids in groups.items():
                waiting, oldest = reservations_backlog(reservations, group_ids=group_ids) if group_ids else (0, 0.0)
                items.add_metric([kind], len(group_ids))
                pending.add_metric([kind], waiting)
                lag.add_metric([kind], oldest)
        except (DatabaseError, redis.RedisError, OSError) as exc:
            logger.warning("metrics: the reservations' backlog could not be read: %r", exc)
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        return [items, pending, lag, up]


_reservations = ReservationsCollector()


@require_GET
def metrics(request):
    """The Prometheus text format, to the callers ``core.metrics.metrics_refusal`` lets in."""
    if not settings.METRICS_ENABLED:
        raise Http404
    refusal = metrics_refusal(request)
    if refusal is not None:
        return refusal
    body, content_type = exposition(_reservations)
    return HttpResponse(body, content_type=content_type)


class MetricsMiddleware(RequestMetricsMiddleware):
    """``core.metrics.RequestMetricsMiddleware``, answering ``/metrics`` itself before any
    other middleware runs: Prometheus reaches each web replica by its address (the Host it
    sends), which ``ALLOWED_HOSTS`` does not list, over plain HTTP inside the private
    network, which ``SECURE_SSL_REDIRECT`` would send to https. Who may read them is
    ``metrics_refusal``'s to say, and the answer builds no URL from the Host."""

    answers = {"/metrics": metrics}
