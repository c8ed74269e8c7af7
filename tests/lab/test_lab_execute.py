"""A lab run carried out for real: gunicorn on the test database, Locust at it, the run's
task in this process (``lab_run_execute``), without a browser."""

from __future__ import annotations

import pytest
import redis
from django.contrib.auth import get_user_model
from django.db.models import Q

from accounts import crowd
from accounts.models import ApiToken
from lab.models import LabLane, LabRun
from lab.services import lab_run_create, lab_run_execute
from loadtests.server import running_server
from tests.live import database_url

pytestmark = [pytest.mark.django_db(transaction=True)]

BROKER = "redis://127.0.0.1:6379/8"


@pytest.fixture
def server(tmp_path, monkeypatch, settings):
    """gunicorn (one process) as the lab's configured target; the runs' outputs under ``tmp_path``."""
    settings.VAR_DIR = tmp_path
    redis.Redis.from_url(BROKER).flushdb()
    with running_server(database_url=database_url(), redis_url=BROKER, processes=1, race_window_ms=0) as running:
        settings.LAB_TARGET_URL = running.host
        yield running


def run_now(user, *, duration: int, strategies=("none",), **overrides):
    params = {"product": "voucher", "scenario": "crowd", "stock": 5, "crowd": 40, "users": 5} | overrides
    run = lab_run_create(user=user, strategies=list(strategies), duration=duration, **params)
    return lab_run_execute(run_id=run.pk)


def test_a_one_second_lane_is_judged_and_the_runs_users_are_retired_after(server, make_user):
    run = run_now(make_user(staff=True), duration=1)
    assert run.status == LabRun.Status.DONE, run.error
    lane = run.lanes.get()
    assert lane.status == LabLane.Status.DONE and lane.verdict, lane.verdict
    # The crowd and the run's member of staff (who held orders.change_voucher): kept, as
    # their orders are the run's evidence, but able to do nothing.
    users = get_user_model().objects.filter(username__startswith=f"lab{run.pk}-")
    assert users.count() == run.crowd + 1
    assert users.filter(username__startswith=f"lab{run.pk}-staff").exists()
    assert not users.filter(Q(is_active=True) | Q(is_staff=True)).exists()
    assert not users.filter(user_permissions__isnull=False).exists()
    assert not users.filter(groups__name=crowd.GROUP).exists()
    assert not ApiToken.objects.filter(user__in=users).exists()
