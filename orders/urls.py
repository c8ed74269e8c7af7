from django.urls import path

from . import views

app_name = "pages"

# The shop opens on the vouchers. Under each voucher, and the orders' pages, the routes are
# those every product has alike, placed as its takes' pages place them (inventory.pages).
urlpatterns = [
    path("", views.voucher_list_page, name="voucher_list"),
    path("vouchers/stock", views.voucher_stock_partial, name="voucher_stock"),
    *views.PURCHASES.urls,
]
