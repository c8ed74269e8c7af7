"""A lab run whose unsafe lane did not reproduce the race, or whose safe lane did not hold:
what its cards, /proof/'s choice and the opening sentence make of it."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from lab.models import LabLane
from lab.proofs import run_proves
from tests.lab.fakeruns import OVERSOLD, fake_run

pytestmark = pytest.mark.django_db

UNREPRODUCED = "FAILED TO REPRODUCE"  # as loadtests.verdict.judge says it


def opening(client) -> str:
    page = client.get(reverse("lab:proof")).content.decode()
    found = re.search(r'<p class="headline" data-testid="headline">(.*?)</p>', page)
    return found.group(1) if found else ""


def test_an_unsafe_lane_that_did_not_reproduce_the_race_proves_nothing(client, make_user):
    """Sold exactly its stock (a light load, no race window): not green as if it held, and the
    run stands for no proof, so /proof/ goes on showing the run that demonstrated the race."""
    staff = make_user(staff=True)
    shown = fake_run(staff)
    assert shown.proves and f"{100 + OVERSOLD} orders were taken" in opening(client)
    later = fake_run(staff)
    LabLane.objects.filter(run=later, strategy="none").update(
        verdict=UNREPRODUCED, ok=False, taken=100, breaks=[["oversold", 0], ["duplicate orders", 0]]
    )
    none = later.lanes.get(strategy="none")
    assert (none.broken, none.unproven, none.state) == (False, True, "unproven")
    assert run_proves(later) == ""
    client.force_login(staff)
    assert 'data-state="unproven"' in client.get(reverse("lab:run", args=[later.pk])).content.decode()
    client.logout()
    assert f"{100 + OVERSOLD} orders were taken" in opening(client)


def test_the_sentence_leaves_out_an_unsafe_lane_that_did_not_break_and_counts_safe_ones_that_did_not_hold(
    client, make_user
):
    """Published, such a run is shown: its sentence neither calls a guard-less sale exact nor
    a safe strategy's duplicate order "exactly" the supply."""
    staff = make_user(staff=True)
    run = fake_run(staff)
    LabLane.objects.filter(run=run, strategy__in=["none", "local"]).update(verdict=UNREPRODUCED, ok=False, taken=100)
    LabLane.objects.filter(run=run, strategy="db_atomic").update(verdict="BROKEN: duplicate orders", ok=False)
    run.published_at = run.finished_at
    run.save(update_fields=["published_at"])
    safe = run.lanes.filter(expected_to_break=False).count()
    assert (
        opening(client)
        == f"With the safe strategies, 100 orders were taken for 100 units (1 of {safe} not shown to hold)."
    )
