from django.apps import AppConfig


class LotteryConfig(AppConfig):
    name = "lottery"
    verbose_name = "Prize draws"

    def ready(self) -> None:
        from inventory.product import product_register

        from .product import POOL

        # The item core finds the prize draw by its kind ("pool"), in the workers too.
        product_register(POOL)
