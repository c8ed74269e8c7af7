"""A bucketed lab run: each strategy on one row and on buckets, its form's bounds, its
lanes' per-bucket charts and units stranded, and /proof/ showing the latest one."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from core.errors import InvalidInput
from lab.models import LabRun
from lab.services import lab_run_create
from tests.lab.fakeruns import fake_run

pytestmark = pytest.mark.django_db

FORM = {"product": "voucher", "scenario": "crowd", "strategies": ["none", "db_atomic"], "stock": 5, "crowd": 50,
        "users": 5, "duration": 3}  # fmt: skip


@pytest.fixture(autouse=True)
def lab_target(settings):
    settings.LAB_TARGET_URL = "http://127.0.0.1:8000"


@pytest.fixture
def staff_client(client, make_user):
    client.force_login(make_user(staff=True))
    return client


def test_a_bucketed_run_has_each_strategy_on_one_row_then_on_its_buckets(
    staff_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        response = staff_client.post(reverse("lab:lab"), FORM | {"buckets": 8})
    assert response.status_code == 302, response.content
    run = LabRun.objects.get()
    assert run.buckets == 8 and run.bucketed
    lanes = [(lane.strategy, lane.buckets, lane.key) for lane in run.lanes.all()]
    assert lanes == [
        ("none", 1, "none"), ("none", 8, "none-8-buckets"),
        ("db_atomic", 1, "db_atomic"), ("db_atomic", 8, "db_atomic-8-buckets"),
    ]  # fmt: skip


def test_a_form_without_buckets_runs_on_one_row(staff_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        assert staff_client.post(reverse("lab:lab"), FORM).status_code == 302
    run = LabRun.objects.get()
    assert run.buckets == 1 and [lane.buckets for lane in run.lanes.all()] == [1, 1]


@pytest.mark.parametrize("buckets", [0, 65, "many"])
def test_the_form_refuses_buckets_out_of_range_with_a_clear_message(staff_client, buckets):
    response = staff_client.post(reverse("lab:lab"), FORM | {"buckets": buckets})
    assert response.status_code == 422
    assert "Buckets must be a whole number from 1 (one row) to 64." in response.content.decode()
    assert not LabRun.objects.exists()


def test_a_bucketed_run_too_long_for_the_lab_is_refused_with_what_to_change(make_user):
    with pytest.raises(InvalidInput, match=r"16 lanes \(8 strategies, each on one row and on 8 buckets\) of 40 s"):
        lab_run_create(
            user=make_user(staff=True), product="voucher", scenario="crowd", strategies=None, stock=5, crowd=50,
            users=5, duration=40, buckets=8,
        )  # fmt: skip
    assert not LabRun.objects.exists()


def lane_card(page: str, key: str) -> str:
    start = page.index(f'data-testid="lane-{key}"')
    return page[start : page.index("</article>", start)]


def test_each_lane_shows_its_units_left_per_bucket_its_sales_per_second_and_stranded_units(staff_client, make_user):
    run = fake_run(make_user(staff=True), strategies=["db_atomic"], buckets=4, stranded=3)
    page = staff_client.get(reverse("lab:run", args=[run.pk])).content.decode()
    split = lane_card(page, "db_atomic-4-buckets")
    assert "on 4 buckets" in split
    assert 'aria-label="Units left per bucket over time"' in split
    assert split.count("<polyline") >= 4 + 1  # a line per bucket, besides the orders'
    assert "4 buckets started with 100 units (24 to 28 each); 3 left at 11.2 s (bucket 0: 3)." in split
    assert '<div class="counter bad" data-testid="stranded"><dt' in split and "<dd>3</dd>" in split
    assert "BROKEN: units stranded while sold out" in split and 'data-state="broken"' in page
    row = lane_card(page, "db_atomic")
    assert "on one row" in row and 'aria-label="Units left in its one row over time"' in row
    assert "One row started with 100 units; it was empty by" in row
    assert '<div class="counter good" data-testid="stranded"><dt' in row
    # Side by side: the sales per second of each, and how many times one row's.
    table = page[page.index('data-testid="side-by-side"') : page.index("</table>")]
    assert table.count('data-testid="side-by-side-row"') == 1
    assert 'href="#lane-db_atomic-4-buckets"' in table and "x</td>" in table


def test_a_run_on_one_row_shows_no_bucket_figures(staff_client, make_user):
    run = fake_run(make_user(staff=True), strategies=["db_atomic"])
    page = staff_client.get(reverse("lab:run", args=[run.pk])).content.decode()
    assert 'data-testid="bucket-chart"' not in page and 'data-testid="stranded"' not in page
    assert 'data-testid="side-by-side"' not in page


def test_the_proof_shows_the_latest_bucketed_run_beside_the_complete_one(client, make_user):
    staff = make_user(staff=True)
    complete = fake_run(staff, finished_ago=timedelta(minutes=30))
    fake_run(staff, strategies=["db_atomic"], buckets=4, finished_ago=timedelta(minutes=20))
    latest = fake_run(staff, strategies=["db_atomic", "redis_lock"], buckets=8, finished_ago=timedelta(minutes=10))
    page = client.get(reverse("lab:proof")).content.decode()
    assert f"Run {complete.pk} (crowd)" in page  # the proof of one row stays
    section = page[page.index('data-testid="proof-buckets-voucher"') :]
    section = section[: section.index("</section>")]
    assert f"Run {latest.pk}, finished" in section and "one row against 8 buckets" in section
    assert section.count('data-testid="bucket-chart"') == 4  # every lane: one row and buckets
    assert section.count('data-testid="stranded"') == 4
    assert 'id="proof-voucher-buckets-redis_lock-8-buckets"' in section
    summary = page[page.index('data-testid="summary-buckets-voucher"') :]
    assert f"On 8 buckets</a> (run {latest.pk}, crowd): " in summary[: summary.index("</p>")]
    assert "0 units stranded" in summary[: summary.index("</p>")]
    assert 'data-testid="proof-buckets-pool"' not in page
