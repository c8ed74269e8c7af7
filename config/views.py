from functools import lru_cache

import redis
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views import defaults
from redis.backoff import NoBackoff
from redis.exceptions import ClusterDownError
from redis.retry import Retry


def healthz(request):
    """200 when the database and every Redis the server uses answer, 503 otherwise, saying
    which failed. ``redis`` is ``REDIS_URL`` (the cache); ``locks``, ``reservations`` and
    ``broker`` are listed only when they are other servers or databases than that one (a
    Redis Cluster of reservations: the first of its nodes that answers, on the whole)."""
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001  (any failure means unhealthy)
        checks["database"] = f"error: {exc.__class__.__name__}"
    try:
        cache.client.get_client(write=True).ping()
        checks["redis"] = "ok"
    except Exception as exc:  # noqa: BLE001
        checks["redis"] = f"error: {exc.__class__.__name__}"
    for role, url in _other_redis_urls().items():
        try:
            if role == "reservations" and settings.RESERVATIONS_REDIS_CLUSTER:
                _cluster_probe(url.split(","))
            else:
                _probe(url).ping()
            checks[role] = "ok"
        except Exception as exc:  # noqa: BLE001
            checks[role] = f"error: {exc.__class__.__name__}"
    healthy = all(value == "ok" for value in checks.values())
    return JsonResponse({"status": "ok" if healthy else "unavailable", **checks}, status=200 if healthy else 503)


def _other_redis_urls() -> dict[str, str]:
    """The Redis URLs of the locks, the reservations and the broker that differ from ``REDIS_URL``."""
    urls = {
        "locks": settings.LOCK_REDIS_URL,
        "reservations": settings.RESERVATIONS_REDIS_URL,
        "broker": settings.CELERY_BROKER_URL,
    }
    return {
        role: url
        for role, url in urls.items()
        if url.startswith(("redis://", "rediss://", "unix://")) and url != settings.REDIS_URL
    }


def _cluster_probe(urls: list[str]) -> None:
    """Raises unless the first node of the Redis Cluster that answers says its every slot is
    served (``cluster_state:ok``): a master down and not yet replaced says ``fail``."""
    for url in urls:
        try:
            info = _probe(url).execute_command("CLUSTER", "INFO")
        except redis.ConnectionError:
            if url == urls[-1]:
                raise
            continue
        if b"cluster_state:ok" not in info:
            raise ClusterDownError("the cluster does not serve every slot")
        return


@lru_cache(maxsize=8)
def _probe(url: str) -> redis.Redis:
    # A second at most, no retry: the health check must answer while a dependency hangs.
    return redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1, retry=Retry(NoBackoff(), 0))


def favicon(request):
    """Browsers ask for /favicon.ico whatever the page links; send them to the SVG.

    Temporary (302): in production the static name carries a content hash that changes
    with the icon, and a browser keeps a permanent redirect for good.
    """
    return redirect(static("img/favicon.svg"))


def bad_request(request, exception=None):
    """Django's 400 (a SuspiciousOperation raised outside the API's operations, such as a body
    over DATA_UPLOAD_MAX_MEMORY_SIZE read by a view or a middleware). A body too large is a
    413; under /api/ the answer is in the API's error shape, as everything there is."""
    from .api import error, too_large_message

    too_large = isinstance(exception, RequestDataTooBig)
    if request.path.startswith("/api/"):
        if too_large:
            return error(request, 413, "too_large", too_large_message())
        return error(request, 400, "bad_request", str(exception or "Bad request."))
    if too_large:
        return render(request, "413.html", {"limit": settings.DATA_UPLOAD_MAX_MEMORY_SIZE}, status=413)
    return defaults.bad_request(request, exception)
