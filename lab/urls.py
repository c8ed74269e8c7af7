from django.urls import path

from . import views

app_name = "lab"

urlpatterns = [
    path("lab/", views.lab_page, name="lab"),
    path("lab/runs/<int:run_id>/", views.lab_run_page, name="run"),
    path("lab/runs/<int:run_id>/live", views.lab_run_live, name="run_live"),
    path("lab/runs/<int:run_id>/cancel", views.lab_run_cancel_view, name="run_cancel"),
    path("lab/runs/<int:run_id>/publish", views.lab_run_publish_view, name="run_publish"),
    path("lab/runs/<int:run_id>/report", views.lab_run_report, name="run_report"),
    path("lab/runs/<int:run_id>/locust/<str:lane>", views.lab_run_locust_report, name="run_locust"),
    path("proof/", views.proof_page, name="proof"),
]
