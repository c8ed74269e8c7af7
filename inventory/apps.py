from django.apps import AppConfig
from django.conf import settings


class InventoryConfig(AppConfig):
    name = "inventory"
    verbose_name = "Inventory"

    def ready(self) -> None:
        from locking import LockLog, observe

        from . import checks  # noqa: F401  (registers the system checks)

        exporter = None
        if settings.METRICS_ENABLED:
            from .metrics import LockObserver

            exporter = LockObserver()
        # Every lock of the process from now on reports to Prometheus and logs its events
        # (the request's id comes with each line, through the logging filter); locking itself
        # stays free of Django and of any metrics system.
        observe(exporter, LockLog())
