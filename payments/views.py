"""The Pay button of a held order's fragment, on the voucher's page and in "My orders": the
same pay as the API's (``order_pay``), answered with the order's fragment as it then stands
(paid, payment pending, refunded). The orders' pages make it (``inventory.pages``); payments
stand above the orders, so the route is placed here."""

from orders.selectors import order_get
from orders.views import PURCHASES

from .services import order_pay

order_pay_view = PURCHASES.change_view("pay", read=order_get, change=order_pay, served=False)
