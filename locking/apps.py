from django.apps import AppConfig


class LockingConfig(AppConfig):
    """Registers the lock connection check; the library itself needs no Django."""

    name = "locking"
    verbose_name = "Locking"

    def ready(self) -> None:
        from . import integration  # noqa: F401
