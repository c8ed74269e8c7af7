from django.core.cache import cache
from django.db import connection
from django.http import JsonResponse
from django.shortcuts import redirect
from django.templatetags.static import static


def healthz(request):
    """200 when the database and Redis both answer, 503 otherwise, saying which failed."""
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
    healthy = all(value == "ok" for value in checks.values())
    return JsonResponse({"status": "ok" if healthy else "unavailable", **checks}, status=200 if healthy else 503)


def favicon(request):
    """Browsers ask for /favicon.ico whatever the page links; send them to the SVG.

    Temporary (302): in production the static name carries a content hash that changes
    with the icon, and a browser keeps a permanent redirect for good.
    """
    return redirect(static("img/favicon.svg"))
