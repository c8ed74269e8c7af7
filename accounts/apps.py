from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "API tokens"

    def ready(self) -> None:
        from . import signals  # noqa: F401  (connects the password change receivers)
