"""A lab run carried out for real: gunicorn on the test database, Locust at it, the run's
task in this process (``lab_run_execute``), without a browser."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q
from django.urls import reverse

from accounts import crowd
from accounts.models import ApiToken
from harness.server import running_server
from inventory.models import Stock
from lab.execute import CANCEL_POLL_SECONDS, lab_dir, lab_run_execute, stopped_on_cancel
from lab.models import LabLane, LabRun
from lab.proofs import proof_of_strategies
from lab.services import lab_run_cancel, lab_run_create
from loadtests.scenarios import SERVER_SETTINGS
from orders.models import Voucher
from tests.live import database_url, instance_keys_emptied

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.load]

BROKER = "redis://127.0.0.1:6379/8"


@pytest.fixture(scope="module")
def gunicorn(django_db_setup):
    """gunicorn (one process) on the test database, started once for the module's runs: each
    run makes its own item, crowd and member of staff, and the server keeps nothing of a
    test's that the next one reads."""
    instance_keys_emptied(BROKER)
    with running_server(database_url=database_url(), redis_url=BROKER, processes=1, race_window_ms=0) as running:
        yield running


@pytest.fixture
def server(gunicorn, tmp_path, settings):
    """The server above as the lab's configured target; the runs' outputs under ``tmp_path``."""
    settings.VAR_DIR = tmp_path
    settings.LAB_TARGET_URL = gunicorn.host
    return gunicorn


def run_now(user, *, duration: int, strategies=("none",), **overrides):
    params = {"product": "voucher", "scenario": "crowd", "stock": 5, "crowd": 40, "users": 5} | overrides
    run = lab_run_create(user=user, strategies=list(strategies), duration=duration, **params)
    return lab_run_execute(run_id=run.pk)


def test_a_one_second_lane_is_judged_and_the_runs_users_are_retired_after(server, make_user):
    run = run_now(make_user(staff=True), duration=1)
    assert run.status == LabRun.Status.DONE, run.error
    lane = run.lanes.get()
    assert lane.status == LabLane.Status.DONE and lane.verdict, lane.verdict
    # What it can stand for on /proof/ (not the crowd's proof, at its size of one strategy),
    # where its unsafe lane reproduced the race in its one second (tests/lab/test_lab_unreproduced.py).
    size = {"stock": 5, "crowd": 40, "users": 5, "duration": 1}
    key = proof_of_strategies(product="voucher", lifecycle=False, strategies=["none"], **size)
    assert run.proves == (key if lane.ok else ""), lane.verdict
    # The crowd and the run's member of staff (who held orders.change_voucher): kept, as
    # their orders are the run's evidence, but able to do nothing.
    users = get_user_model().objects.filter(username__startswith=f"lab{run.pk}-")
    assert users.count() == run.crowd + 1
    assert users.filter(username__startswith=f"lab{run.pk}-staff").exists()
    assert not users.filter(Q(is_active=True) | Q(is_staff=True)).exists()
    assert not users.filter(user_permissions__isnull=False).exists()
    assert not users.filter(groups__name=crowd.GROUP).exists()
    assert not ApiToken.objects.filter(user__in=users).exists()


def test_cancelling_stops_the_running_strategys_crowd_and_the_rest_are_not_run(server, make_user):
    staff = make_user(staff=True)
    run = lab_run_create(
        user=staff, product="voucher", scenario="crowd", strategies=["none", "db_atomic"], stock=5, crowd=3000,
        users=5, duration=40,
    )  # fmt: skip
    cancelled_at = []

    def cancel_once_the_crowd_buys():
        try:
            lanes = LabLane.objects.filter(run=run, strategy="none", status=LabLane.Status.RUNNING, taken__gte=1)
            give_up = time.monotonic() + 60
            while not lanes.exists() and time.monotonic() < give_up:
                time.sleep(0.1)
            lab_run_cancel(run=LabRun.objects.get(pk=run.pk), user=staff)
            cancelled_at.append(time.time())
        finally:
            connection.close()

    canceller = threading.Thread(target=cancel_once_the_crowd_buys)
    canceller.start()
    run = lab_run_execute(run_id=run.pk)
    canceller.join()
    assert run.status == LabRun.Status.CANCELLED and run.error.startswith("Cancelled by")
    none, safe = run.lanes.order_by("position")
    assert none.status == LabLane.Status.CANCELLED
    assert safe.status == LabLane.Status.NOT_RUN
    # Locust, stopped within seconds of the cancel (its stop timeout is 5 s), not at the end
    # of its 40: the last line of the stats history it appends to every second while it runs.
    # What follows its stop (the audit, 3,000 users retired) is no part of it.
    stopped_at = (lab_dir(run) / none.key / "locust_stats_history.csv").stat().st_mtime
    assert stopped_at - cancelled_at[0] < 10
    assert none.figures["requests"] > 0 and none.verdict


def test_a_cancel_is_seen_by_the_lanes_watch_without_any_sample_of_the_lane(make_user, settings):
    """The watch looks for the cancel on its own thread and connection: a lane whose sampling
    is slow or failing (a dependency down) still stops once staff cancel."""
    settings.LAB_TARGET_URL = "http://127.0.0.1:9"
    staff = make_user(staff=True)
    run = lab_run_create(
        user=staff, product="voucher", scenario="crowd", strategies=["none"], stock=5, crowd=5, users=5, duration=5
    )
    LabRun.objects.filter(pk=run.pk).update(status=LabRun.Status.RUNNING)
    with stopped_on_cancel(run) as stop:
        assert not stop.wait(3 * CANCEL_POLL_SECONDS)
        lab_run_cancel(run=run, user=staff)
        assert stop.wait(30)


@pytest.fixture
def lifecycle_server(tmp_path, settings):
    """gunicorn with the Celery worker and beat a lifecycle run needs (holds released at their
    deadline, swept each second), in the settings ``make run`` gives them."""
    settings.VAR_DIR = tmp_path
    instance_keys_emptied(BROKER)
    with running_server(
        database_url=database_url(), redis_url=BROKER, processes=1, race_window_ms=0, celery=True,
        settings=SERVER_SETTINGS,
    ) as running:  # fmt: skip
        settings.LAB_TARGET_URL = running.host
        # The task reads the settings of the worker it runs in: here, this process's.
        for name, value in SERVER_SETTINGS.items():
            setattr(settings, name, type(getattr(settings, name))(value))
        yield running


def test_a_lifecycle_lane_holds_drains_and_is_judged_on_the_lifecycle(lifecycle_server, make_user, monkeypatch):
    # Every winner leaves the prize (the crowd's Locust inherits this process's environment):
    # at the scenario's half, all five first winners claimed one run in 32, and none came back.
    monkeypatch.setenv("LOADTEST_ABANDON_SHARE", "1")
    run = run_now(
        make_user(staff=True), duration=2, strategies=("db_atomic",), product="pool", scenario="draw-abandon",
        crowd=30, stock=5,
    )  # fmt: skip
    assert run.status == LabRun.Status.DONE, run.error
    assert run.caveat == ""
    lane = run.lanes.get()
    assert lane.verdict == "holds", lane.figures
    figures = lane.figures
    assert figures["released"] > 0 and figures["held_left"] == 0, figures
    assert figures["holds_drain_s"] is not None, figures
    assert [label for label, _, _ in lane.lifecycle_cells] == run.lifecycle_labels
    assert not any(bad for _, _, bad in lane.lifecycle_cells)


def test_a_bucketed_run_records_each_lanes_units_left_per_bucket_as_the_database_holds_them(server, make_user, client):
    staff = make_user(staff=True)
    # More stock than buyers: units are left in every bucket, and nobody is told sold out.
    run = run_now(staff, duration=2, strategies=("db_atomic",), stock=60, crowd=20, buckets=4)
    assert run.status == LabRun.Status.DONE, run.error
    row, split = run.lanes.order_by("position")
    assert (row.key, split.key) == ("db_atomic", "db_atomic-4-buckets")
    for lane, buckets in ((row, 1), (split, 4)):
        assert lane.verdict == "holds", lane.figures
        assert lane.figures["buckets"] == buckets and lane.stranded == 0, lane.figures
        group = Voucher.objects.get(pk=lane.item_id).group_id
        held = dict(Stock.objects.filter(group_id=group).values_list("bucket", "quantity"))
        _, last = lane.bucket_series[-1]
        assert last == [held[bucket] for bucket in sorted(held)] and len(last) == buckets
        assert sum(last) == lane.stock_left == 60 - lane.taken > 0
    client.force_login(staff)
    page = client.get(reverse("lab:run", args=[run.pk])).content.decode()
    assert page.count('data-testid="bucket-chart"') == 2 and 'data-testid="side-by-side"' in page
    assert client.get(reverse("lab:run_locust", args=[run.pk, split.key])).status_code == 200


def test_a_surge_lane_through_the_waiting_room_shows_the_take_and_the_rooms_fairness(server, make_user, client):
    run = run_now(make_user(staff=True), duration=3, strategies=("db_atomic",), scenario="surge-queue", crowd=40)
    assert run.status == LabRun.Status.DONE, run.error
    lane = run.lanes.get()
    assert lane.verdict == "holds", lane.figures
    cells = {label: (value, bad) for label, value, bad in lane.surge_cells}
    assert set(cells) == {
        "take p50", "take p99", "errors and timeouts", "admitted", "told sold out", "inversions", "longest wait",
    }  # fmt: skip
    assert not any(bad for _, bad in cells.values()), cells
    assert lane.figures["admitted"] >= 5 and lane.figures["told_sold_out"] > 0, lane.figures
    proof = client.get("/proof/").content.decode()
    assert 'data-testid="proof-surge"' in proof and "Through the waiting room" in proof
    assert 'data-testid="surge-counter"' in proof


def test_a_hoarding_lane_run_from_the_lab_lets_the_honest_buyer_buy(lifecycle_server, make_user):
    run = run_now(
        make_user(staff=True), duration=5, strategies=("db_atomic",), scenario="hoarding", crowd=7, users=7, stock=3
    )
    assert run.status == LabRun.Status.DONE, run.error
    lane = run.lanes.get()
    assert lane.verdict == "holds", lane.figures
    assert lane.figures["honest_bought"] is True and lane.figures["abandon_capped"] is True, lane.figures
