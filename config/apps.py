from django.apps import AppConfig


class ProjectConfig(AppConfig):
    """The project itself, as an app: only for the commands that span both products."""

    name = "config"
    label = "project"
    verbose_name = "Project"
