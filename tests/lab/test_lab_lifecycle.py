"""The lifecycle's scenarios in the race lab: offered, judged with the site's settings in
view, and shown with their columns on a run's page and on /proof/."""

from __future__ import annotations

import pytest
from django.urls import reverse

from lab.lifecycle import settings_caveat
from lab.models import LabRun
from lab.services import lab_run_create
from loadtests.scenarios import ALL, HOLD_SECONDS, LIFECYCLE, SERVER_SETTINGS
from tests.lab.fakeruns import RETURNED_TWICE, fake_run

pytestmark = pytest.mark.django_db


def test_the_form_offers_each_products_lifecycle_scenarios_after_its_crowds(client, make_user):
    client.force_login(make_user(staff=True))
    page = client.get(reverse("lab:lab")).content.decode()
    for name in LIFECYCLE:
        assert f'value="{name}"' in page
    # The crowd stays the default, and the lifecycle's come after each product's crowds.
    assert page.index('value="restock"') < page.index('value="abandon"')
    assert page.index('value="draw-hammer"') < page.index('value="draw-abandon"')


def test_a_lifecycle_run_is_started_like_any_other(make_user, settings, django_capture_on_commit_callbacks):
    settings.LAB_TARGET_URL = "http://127.0.0.1:8000"
    with django_capture_on_commit_callbacks(execute=False):
        run = lab_run_create(
            user=make_user(staff=True), product="pool", scenario="claim-race", strategies=["none"], stock=5,
            crowd=20, users=5, duration=2,
        )  # fmt: skip
    assert run.lifecycle and run.hold_seconds == HOLD_SECONDS  # recorded with the run
    assert run.lifecycle_labels[:2] == ["claimed", "forfeited"]


def test_a_lifecycle_runs_page_says_the_hold_it_ran_with_not_todays(client, make_user, monkeypatch):
    staff = make_user("lab-staff", staff=True)
    run = fake_run(staff, product="voucher", scenario="pay-race", strategies=["none", "db_atomic"])
    LabRun.objects.filter(pk=run.pk).update(hold_seconds=7)  # as it ran, whatever the code says now
    client.force_login(staff)
    assert "each take held 7 s for its pay or claim" in client.get(reverse("lab:run", args=[run.pk])).content.decode()


def test_the_caveat_names_what_the_site_leaves_out_and_only_that(settings):
    for name, value in SERVER_SETTINGS.items():
        setattr(settings, name, type(getattr(settings, name))(value))
    assert settings_caveat(ALL["pay-race"]) == ""
    assert settings_caveat(ALL["crowd"]) == ""
    settings.PAYMENT_PROVIDER_JITTER_MS = 0
    caveat = settings_caveat(ALL["pay-race"])
    assert "PAYMENT_PROVIDER_JITTER_MS=0" in caveat and "pays race the deadline" in caveat
    # A pool has no payments: the provider's settings are none of its business.
    assert settings_caveat(ALL["claim-race"]) == ""


def test_a_lifecycle_runs_page_shows_its_columns_red_where_unsafe(client, make_user):
    staff = make_user(staff=True)
    run = fake_run(staff, scenario="pay-race", strategies=["none", "db_atomic"], caveat="This site runs with X=0.")
    client.force_login(staff)
    page = client.get(reverse("lab:run", args=[run.pk])).content.decode()
    for label in ("returned twice", "paid+released", "200s unsettled", "payments off", "released", "resold"):
        assert f"<th>{label}</th>" in page
    assert f'class="bad" data-testid="lifecycle-cell">{RETURNED_TWICE}<' in page
    assert 'class="" data-testid="lifecycle-cell">0<' in page
    assert "This site runs with X=0." in page


def test_the_proof_shows_the_latest_lifecycle_run_beside_the_crowds(client, make_user):
    staff = make_user(staff=True)
    crowd = fake_run(staff)
    held = fake_run(staff, scenario="abandon")
    page = client.get(reverse("lab:proof")).content.decode()
    # A lifecycle run does not replace the crowd's proof: both are shown.
    assert f"Run {crowd.pk} (crowd)" in page
    assert 'data-testid="summary-lifecycle-voucher"' in page
    assert 'data-testid="proof-lifecycle-voucher"' in page
    assert f"Run {held.pk}, finished" in page
    assert 'href="#proof-voucher-lifecycle-none"' in page and 'id="proof-voucher-lifecycle-none"' in page
    assert 'data-testid="lifecycle-counter"><dt>returned twice</dt>' in page
    assert 'data-testid="summary-lifecycle-pool"' not in page


@pytest.mark.parametrize(
    ("product", "scenario", "words"),
    [
        (
            "voucher",
            "pay-race",
            "{supplied} of {supplied} units sold, 58 of them again after a release ({taken} sales)",
        ),
        (
            "pool",
            "claim-race",
            "{supplied} of {supplied} prizes awarded, 58 of them again after a forfeit ({taken} awards)",
        ),
    ],
)
def test_a_safe_lifecycle_lane_counts_its_resold_units_in_words_that_are_no_oversell(
    client, make_user, product, scenario, words
):
    """A unit released and taken again counts each time: "158 of 100" read as the crowd run's
    oversell. The figure set against the supply leaves the resales out."""
    staff = make_user("lab-staff", staff=True)
    run = fake_run(staff, product=product, scenario=scenario, strategies=["none", "db_atomic"])
    lane = run.lanes.get(strategy="db_atomic")
    lane.taken = lane.supplied + 58
    lane.figures = {**lane.figures, "resold": 58}
    lane.save()
    client.force_login(staff)
    page = client.get(reverse("lab:run", args=[run.pk])).content.decode()
    assert words.format(taken=lane.taken, supplied=lane.supplied) in page
    assert f"{lane.taken} of {lane.supplied}<" not in page


def test_a_crowd_lanes_take_beyond_its_supply_still_reads_as_one(client, make_user):
    staff = make_user("lab-staff", staff=True)
    run = fake_run(staff, strategies=["none"])
    lane = run.lanes.get()
    client.force_login(staff)
    page = client.get(reverse("lab:run", args=[run.pk])).content.decode()
    assert lane.taken > lane.supplied
    assert f'<dd data-testid="taken">{lane.taken} of {lane.supplied}</dd>' in page
