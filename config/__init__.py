from . import worker_metrics  # noqa: F401  (connects the worker's own /metrics to its signals)
from .celery import app as celery_app

__all__ = ["celery_app"]
