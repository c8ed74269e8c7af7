from django.urls import path

from . import views

app_name = "pages"

urlpatterns = [
    path("", views.voucher_list_page, name="voucher_list"),
    path("vouchers/stock", views.voucher_stock_partial, name="voucher_stock"),
    path("vouchers/<int:voucher_id>/", views.voucher_detail_page, name="voucher_detail"),
    path("vouchers/<int:voucher_id>/live", views.voucher_live_partial, name="voucher_live"),
    path("vouchers/<int:voucher_id>/buy", views.voucher_buy, name="voucher_buy"),
    path("vouchers/<int:voucher_id>/strategy", views.voucher_strategy_switch, name="voucher_strategy"),
    path("orders/", views.order_list_page, name="order_list"),
    path("orders/<int:order_id>/status", views.order_status_partial, name="order_status"),
]
