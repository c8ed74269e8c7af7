"""The race lab end to end: a staff user runs it in headless Chromium against gunicorn
(two worker processes), a real Celery worker carries the run out with Locust, and the
page shows `none` turn red while a safe strategy stays green, on MariaDB and on SQLite;
`redis_lua` holds too, its reservations written by the worker's other process while the
run holds the first."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from playwright.sync_api import expect

from accounts.models import ApiToken
from harness.server import ROOT, running_server
from lab.models import LabLane, LabRun
from tests import test_browser
from tests.live import database_url, instance_keys_emptied
from tests.test_browser import PASSWORD, log_in

browser = test_browser.browser
page = test_browser.page

# Also a race test: make test runs it again on SQLite, the database of make run.
pytestmark = [pytest.mark.browser, pytest.mark.race, pytest.mark.django_db(transaction=True)]

# A broker of its own, so that no task another test queued (and never ran) reaches this worker.
BROKER = "redis://127.0.0.1:6379/8"


@pytest.fixture
def stack(tmp_path, monkeypatch):
    """gunicorn with two processes and a Celery worker, on the test database, writing the
    runs' outputs under ``tmp_path``."""
    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    instance_keys_emptied(BROKER)
    with running_server(database_url=database_url(), redis_url=BROKER, processes=2, race_window_ms=20) as server:
        # As make run starts it: the lab's queue and the default one (redis_lua's drains).
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "celery,lab", "--concurrency", "2",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=server.env,
        )  # fmt: skip
        try:
            yield server
        finally:
            worker.terminate()
            worker.wait(30)


def test_a_lab_run_shows_none_oversell_and_a_safe_strategy_hold(page, stack, make_user):
    staff = make_user("lab-staff", staff=True)
    # The server runs the production hashers, not the test suite's fast one.
    staff.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    staff.save(update_fields=["password"])
    log_in(page, SimpleNamespace(url=stack.host), "lab-staff")
    page.get_by_test_id("lab-link").click()
    form = page.get_by_test_id("lab-form")
    expect(form).to_be_visible()
    for box in form.locator("input[name=strategies]").all():
        box.set_checked(box.get_attribute("value") in {"none", "db_atomic", "redis_lua"})
    form.locator("input[name=stock]").fill("10")
    form.locator("input[name=crowd]").fill("300")
    form.locator("input[name=users]").fill("20")
    form.locator("input[name=duration]").fill("3")
    page.get_by_test_id("run").click()

    none, safe = page.get_by_test_id("lane-none"), page.get_by_test_id("lane-db_atomic")
    deferred = page.get_by_test_id("lane-redis_lua")
    # Live: red while the run is still going on (the safe lane has not finished yet).
    expect(none).to_have_attribute("data-state", "broken", timeout=60_000)
    expect(none.get_by_test_id("counter").first).to_have_class("counter bad")
    expect(page.get_by_test_id("run-status")).to_have_text("done", timeout=150_000)
    expect(none.get_by_test_id("verdict")).to_contain_text("broke as expected")
    expect(safe).to_have_attribute("data-state", "holding")
    expect(safe.get_by_test_id("verdict")).to_have_text("holds")
    for counter in safe.get_by_test_id("counter").all():
        expect(counter).to_have_class("counter good")
    expect(deferred.get_by_test_id("verdict")).to_have_text("holds")
    expect(deferred.get_by_test_id("accepted")).to_contain_text("10")  # every unit answered 202

    run = LabRun.objects.get()
    assert run.status == LabRun.Status.DONE and run.server_processes == 2
    lanes = {lane.strategy: lane for lane in run.lanes.all()}
    assert lanes["none"].figures["oversold"] > 0 and lanes["none"].ok
    assert lanes["db_atomic"].figures["oversold"] == 0 and lanes["db_atomic"].ok
    # Every 202 written as one order, nothing left waiting, Redis in step with the database.
    figures = lanes["redis_lua"].figures
    assert lanes["redis_lua"].ok and figures["accepted"] == figures["confirmed"] == figures["orders"] == 10, figures
    assert (figures["lost_confirmations"], figures["unpersisted"], figures["redis_state"]) == (0, 0, True), figures
    assert figures["drain_s"] is not None and not any(figures["redis_drift"].values()), figures
    assert all(lane.status == LabLane.Status.DONE for lane in lanes.values())
    # The crowd's tokens were good for this run only.
    assert not ApiToken.objects.filter(user__username__startswith=f"lab{run.pk}-").exists()
    # The full report the run wrote, served to staff.
    page.get_by_test_id("report-link").click()
    expect(page.locator("h1")).to_have_text("Load test verdict")
