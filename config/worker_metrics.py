"""The Celery worker's own ``/metrics``, where it runs apart from the web (docker-compose):
the counts its tasks make (``inventory.metrics``: reconciliation drift, the rows the
drains write and the reservations they fail) served by the worker's main process.

With ``CELERY_METRICS_PORT`` set, the worker empties ``PROMETHEUS_MULTIPROC_DIR`` before its
pool starts (the directory is the worker's alone: counts of an earlier run would be added
in), and once ready serves every pool process's counts from it on that port. Without it
(``make run``, the tests) nothing is served here: ``make run``'s worker counts in a
subdirectory of the web's directory, which the web's ``/metrics`` adds in.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from celery.signals import celeryd_init, worker_ready
from prometheus_client import REGISTRY, CollectorRegistry, start_http_server


def _port() -> int | None:
    value = os.environ.get("CELERY_METRICS_PORT", "")
    return int(value) if value else None


@celeryd_init.connect(dispatch_uid="config.worker_metrics.directory_empty")
def directory_empty(**kwargs) -> None:
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if _port() is None or not directory:
        return
    shutil.rmtree(directory, ignore_errors=True)
    Path(directory).mkdir(parents=True)


@worker_ready.connect(dispatch_uid="config.worker_metrics.metrics_serve")
def metrics_serve(**kwargs) -> None:
    port = _port()
    if port is None:
        return
    from core.metrics import ProcessFiles

    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    registry = REGISTRY
    if directory:
        registry = CollectorRegistry()
        registry.register(ProcessFiles(directory))
    # This machine alone unless told otherwise: the counts are for operators, and this server
    # asks no token. docker-compose serves them to its own network, where only Prometheus reads.
    start_http_server(port, addr=os.environ.get("CELERY_METRICS_ADDRESS", "127.0.0.1"), registry=registry)
