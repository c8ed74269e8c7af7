from django.apps import AppConfig


class OrdersConfig(AppConfig):
    name = "orders"
    verbose_name = "Orders"

    def ready(self) -> None:
        from inventory.product import product_register

        from .product import VOUCHER

        # The item core finds the flash sale by its kind ("voucher"), in the workers too.
        product_register(VOUCHER)
