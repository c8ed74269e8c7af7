from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from .api import api
from .metrics import metrics
from .views import favicon, healthz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("favicon.ico", favicon, name="favicon"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("lab.urls")),
    path("", include("lottery.urls")),
    path("", include("orders.urls")),
    path("", include("payments.urls")),
]

# A body over the size limit read outside the API's operations: 413, JSON under /api/.
handler400 = "config.views.bad_request"
# A dependency out of reach: 503 with Retry-After, never the 500 page (core.outage).
handler500 = "core.outage.server_error"
