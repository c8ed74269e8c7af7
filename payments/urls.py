from django.urls import path

from orders.views import PURCHASES

from . import views

app_name = "payments"

# Beside the order's other routes (orders/<order_id>/cancel), as the orders' pages place them.
urlpatterns = [
    path(PURCHASES.record_route("pay"), views.order_pay_view, name="order_pay"),
]
