from django.apps import AppConfig


class LabConfig(AppConfig):
    name = "lab"
    verbose_name = "Race lab"
    default_auto_field = "django.db.models.BigAutoField"
