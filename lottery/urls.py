from django.urls import path

from . import views

app_name = "lottery"

urlpatterns = [
    path("pools/", views.pool_list_page, name="pool_list"),
    path("draws/", views.draw_list_page, name="draw_list"),
    path("pools/rows", views.pool_rows_partial, name="pool_rows"),
    path("pools/<int:pool_id>/", views.pool_detail_page, name="pool_detail"),
    path("pools/<int:pool_id>/odds", views.pool_odds_partial, name="pool_odds"),
    path("pools/<int:pool_id>/standing", views.pool_standing_partial, name="pool_standing"),
    path("pools/<int:pool_id>/draw", views.pool_draw_view, name="pool_draw"),
    path("pools/<int:pool_id>/strategy", views.pool_strategy_switch, name="pool_strategy"),
    path("draws/<int:draw_id>/status", views.draw_status_partial, name="draw_status"),
]
