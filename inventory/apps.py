from django.apps import AppConfig
from django.conf import settings


class InventoryConfig(AppConfig):
    name = "inventory"
    verbose_name = "Inventory"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)

        if settings.METRICS_ENABLED:
            from locking.metrics import observe

            from .metrics import LockObserver

            # Every lock of the process from now on reports to Prometheus; locking itself
            # stays free of Django and of any metrics system.
            observe(LockObserver())
