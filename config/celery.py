"""The Celery application. Tasks take ids, are idempotent and use acks_late.

Logging is the web's: the worker and the beat log through the settings' ``LOGGING``
(``LOG_FORMAT``, ``LOG_LEVEL``), not through Celery's own setup, so that their lines have the
same shape and carry the request id. A task sent while a request (or a task) runs carries
that request's id in its headers, and its worker binds it while the task runs.
"""

import logging.config
import os

from celery import Celery, signals

from core import requestid

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# The header a task's request id travels in (Celery's own headers have other names).
HEADER = "request_id"


@signals.setup_logging.connect
def logging_from_settings(**kwargs) -> None:
    """Connected, Celery leaves logging alone (no handler of its own, ``--loglevel`` unused):
    the settings' ``LOGGING`` decides, in the worker and the beat alike."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


@signals.before_task_publish.connect
def request_id_sent(headers=None, **kwargs) -> None:
    request_id = requestid.current()
    if request_id is not None and headers is not None:
        # A retry keeps the id it was first sent with.
        headers.setdefault(HEADER, request_id)


# Task id -> the token that undoes its binding: a task run eagerly, inside a request, must
# leave the request's id as it found it.
_bound: dict[str, object] = {}


@signals.task_prerun.connect
def request_id_bound(task_id=None, task=None, **kwargs) -> None:
    request_id = requestid.sane(getattr(task.request, HEADER, None))
    if request_id is not None:
        _bound[task_id] = requestid.bind(request_id)


@signals.task_postrun.connect
def request_id_unbound(task_id=None, **kwargs) -> None:
    token = _bound.pop(task_id, None)
    if token is not None:
        requestid.unbind(token)
