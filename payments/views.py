"""The Pay button of a held order's fragment, on the voucher's page and in "My orders": the
same pay as the API's (``.api.PAY``: ``order_pay`` with its idempotency key and rate
limits), answered with the order's fragment as it then stands (paid, payment pending,
refunded). The orders' pages make it (``inventory.pages``); payments stand above the orders,
so the route is placed here."""

from orders.views import PURCHASES

from .api import PAY

order_pay_view = PURCHASES.change_view(PAY, served=False)
