from django.urls import path

from . import views

app_name = "lottery"

# Under each pool, and the draws' pages, the routes are those every product has alike, placed
# as its takes' pages place them (inventory.pages).
urlpatterns = [
    path("pools/", views.pool_list_page, name="pool_list"),
    path("pools/rows", views.pool_rows_partial, name="pool_rows"),
    *views.DRAWS.urls,
]
