"""Starting a lab run: the rules (registries, bounds, one at a time), and its pages' access."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from accounts.models import ApiToken
from accounts.services import _Written, users_with_tokens_create
from core.errors import InvalidInput
from core.namespace import key_prefix
from inventory.strategies import strategy_names
from inventory.texts import TEXTS
from lab.errors import LabBusy
from lab.execute import TOKENS_FILE, lab_dir, lab_run_fail
from lab.models import LabLane, LabRun
from lab.selectors import lab_run_proof
from lab.services import BOUNDS, DEFAULTS, lab_run_create
from loadtests.scenarios import ALL
from loadtests.staff import staff_token_create
from loadtests.verdict import NOT_PROVEN, Result
from locking.integration import locks_redis
from locking.lock import resource_keys
from tests.conftest import STAFF_PERMISSIONS
from tests.lab.fakeruns import OVERSOLD, fake_run
from tests.plans import explain

pytestmark = pytest.mark.django_db


TARGET = "http://127.0.0.1:8000/"


@pytest.fixture(autouse=True)
def lab_target(settings):
    """The lab's configured target (make run sets it to its own address)."""
    settings.LAB_TARGET_URL = TARGET


@pytest.fixture
def create(make_user, django_capture_on_commit_callbacks):
    """lab_run_create with sensible parameters; the Celery task is not sent (its on-commit
    hook is captured, not run), since these tests are about the rules."""
    staff = make_user(staff=True)

    def create(**overrides):
        params = {
            "user": staff,
            "product": "voucher",
            "scenario": "crowd",
            "strategies": None,
            "stock": 10,
            "crowd": 100,
            "users": 10,
            "duration": 3,
        } | overrides
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            run = lab_run_create(**params)
        # The task, sent once the run is committed; beside it, the mark by which the token
        # revocations of the run's crowd know their transaction (``accounts.services._Written``).
        assert len([callback for callback in callbacks if not isinstance(callback, _Written)]) == 1
        return run

    return create


def test_a_run_has_one_lane_per_strategy_of_the_registry_by_default(create):
    run = create()
    assert [lane.strategy for lane in run.lanes.all()] == strategy_names()
    assert run.status == LabRun.Status.QUEUED
    assert run.target_url == "http://127.0.0.1:8000"


def test_chosen_strategies_run_in_registry_order(create):
    run = create(strategies=["db_atomic", "none"])
    assert [lane.strategy for lane in run.lanes.all()] == ["none", "db_atomic"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"product": "tickets"}, "Unknown product"),
        ({"scenario": "stampede"}, "Unknown scenario"),
        ({"scenario": "draw-crowd"}, "other product"),
        ({"product": "pool", "scenario": "crowd"}, "other product"),
        ({"strategies": ["none", "telepathy"]}, "Unknown strategies: telepathy"),
        ({"duration": 61}, "duration must be a whole number from 1 to 60"),
        ({"duration": 0}, "duration"),
        ({"stock": BOUNDS["stock"][1] + 1}, "stock"),
        ({"crowd": 0}, "crowd"),
        ({"users": True}, "users"),
    ],
)
def test_bad_parameters_are_refused_and_nothing_is_created(create, overrides, message):
    with pytest.raises(InvalidInput, match=message):
        create(**overrides)
    assert not LabRun.objects.exists()
    assert not LabLane.objects.exists()


def test_one_run_at_a_time(create):
    first = create()
    with pytest.raises(LabBusy):
        create()
    lab_run_fail(run=first, error="stopped by the test")
    assert create().pk != first.pk


def test_a_run_its_worker_abandoned_does_not_block_the_lab(create):
    stale = create(strategies=["none"], duration=5)
    LabRun.objects.filter(pk=stale.pk).update(created_at=timezone.now() - timedelta(minutes=10))
    create()
    stale.refresh_from_db()
    assert stale.status == LabRun.Status.FAILED
    assert "Abandoned" in stale.error
    assert stale.lanes.get().status == LabLane.Status.NOT_RUN  # it never started


def lab_users_with_tokens_file(run, settings, tmp_path) -> tuple:
    """What a run's task makes as it starts: its crowd and member of staff, each with a token,
    and the file of the crowd's tokens under the run's folder."""
    settings.VAR_DIR = tmp_path
    pairs = users_with_tokens_create(count=3, prefix=f"lab{run.pk}")
    staff_token_create(prefix=f"lab{run.pk}-staff")
    tokens = lab_dir(run) / TOKENS_FILE
    tokens.parent.mkdir(parents=True)
    tokens.write_text("".join(f"{username} {token}\n" for username, token in pairs))
    return get_user_model().objects.filter(username__startswith=f"lab{run.pk}-"), tokens


def assert_retired(users, tokens) -> None:
    assert users.count() == 4
    assert not users.filter(Q(is_active=True) | Q(is_staff=True)).exists()
    assert not ApiToken.objects.filter(user__in=users).exists()
    assert not tokens.exists()


def test_a_run_whose_worker_died_is_failed_by_its_redelivered_task_and_its_users_retired(create, settings, tmp_path):
    """The worker died mid-run (killed, out of memory, past its time limit): the task comes
    again (acks_late), takes the lab's lock and finds the run running, which no task then
    carries out. Left so, the run stayed running and its users' tokens kept working."""
    from lab.execute import lab_run_execute

    run = create(strategies=["none"])
    LabRun.objects.filter(pk=run.pk).update(status=LabRun.Status.RUNNING, started_at=timezone.now())
    LabLane.objects.filter(run=run).update(status=LabLane.Status.RUNNING)
    users, tokens = lab_users_with_tokens_file(run, settings, tmp_path)
    run = lab_run_execute(run_id=run.pk)
    assert run.status == LabRun.Status.FAILED and "worker stopped" in run.error
    assert run.lanes.get().status == LabLane.Status.FAILED
    assert_retired(users, tokens)
    assert create().status == LabRun.Status.QUEUED  # the lab is free again


def test_a_run_that_waited_long_in_the_queue_is_not_abandoned_while_its_lanes_run(create):
    """Its allowed time counts from its start: a run queued for long (behind another run, or
    waiting for a worker) and then started is still running, not abandoned."""
    running = create(strategies=["none"], duration=5)
    LabRun.objects.filter(pk=running.pk).update(
        status=LabRun.Status.RUNNING, created_at=timezone.now() - timedelta(minutes=10), started_at=timezone.now()
    )
    with pytest.raises(LabBusy):
        create()
    running.refresh_from_db()
    assert running.status == LabRun.Status.RUNNING and not running.error


def test_a_run_failed_as_abandoned_has_its_users_retired(create, settings, tmp_path):
    stale = create(strategies=["none"], duration=5)
    ago = timezone.now() - timedelta(minutes=10)
    LabRun.objects.filter(pk=stale.pk).update(status=LabRun.Status.RUNNING, created_at=ago, started_at=ago)
    users, tokens = lab_users_with_tokens_file(stale, settings, tmp_path)
    create()
    stale.refresh_from_db()
    assert stale.status == LabRun.Status.FAILED and "Abandoned" in stale.error
    assert_retired(users, tokens)


def test_a_runs_tokens_work_no_longer_than_the_run_may_take(create, settings, tmp_path, monkeypatch):
    """Should its cleanup never run, the crowd's and its member of staff's tokens still end
    with the longest a run may take, not the API's 30 days; not sooner, since a few slow lanes
    may pass the run's own allowance while its crowd still needs them."""
    from lab import execute

    settings.VAR_DIR = tmp_path
    run = create(strategies=["none", "db_atomic"], crowd=3)
    expiries = []

    def lanes(running, *args):  # stands for the lanes, which use the tokens
        users = get_user_model().objects.filter(username__startswith=f"lab{running.pk}-")
        expiries.extend(ApiToken.objects.filter(user__in=users).values_list("expires_at", flat=True))

    monkeypatch.setattr(execute, "_run_lanes_with", lanes)
    run = execute.lab_run_execute(run_id=run.pk)
    assert run.status == LabRun.Status.DONE, run.error
    assert len(expiries) == run.crowd + 1
    longest = timedelta(seconds=execute.LONGEST_RUN_SECONDS)
    assert (
        run.started_at + longest - timedelta(seconds=5) <= min(expiries) <= max(expiries) <= run.finished_at + longest
    )


@pytest.mark.django_db(transaction=True)
def test_a_lane_that_loses_its_database_connection_fails_the_run_with_the_lanes_own_error(
    make_user, settings, tmp_path, monkeypatch
):
    """The database drops the task's connection during a lane: the cleanup and the failure
    that follow must not fail in turn on the dead connection, leaving the run running and
    its error lost."""
    from lab import execute

    settings.VAR_DIR = tmp_path
    run = fake_run(
        make_user(staff=True), status="queued", strategies=["none"], lane_status={"none": "waiting"}, crowd=3
    )

    def lane_whose_connection_the_database_drops(running, *args):
        with connection.cursor() as cursor:
            cursor.execute("SELECT CONNECTION_ID()")
            (own,) = cursor.fetchone()
        other = connections.create_connection(DEFAULT_DB_ALIAS)
        try:
            with other.cursor() as cursor:
                cursor.execute(f"KILL CONNECTION {int(own)}")
                gone = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s"
                cursor.execute(gone, [own])
                while cursor.fetchone()[0]:  # until the server has closed it
                    time.sleep(0.05)
                    cursor.execute(gone, [own])
        finally:
            other.close()
        LabRun.objects.get(pk=running.pk)  # the lane's next read

    monkeypatch.setattr(execute, "_run_lanes_with", lane_whose_connection_the_database_drops)
    run = execute.lab_run_execute(run_id=run.pk)
    assert run.status == LabRun.Status.FAILED
    assert "OperationalError" in run.error and "lane_whose_connection_the_database_drops" in run.error, run.error
    assert run.lanes.get().status == LabLane.Status.NOT_RUN
    assert_retired(get_user_model().objects.filter(username__startswith=f"lab{run.pk}-"), lab_dir(run) / TOKENS_FILE)


@pytest.mark.django_db(transaction=True)  # the lane's watch reads the run on a connection of its own
def test_a_run_that_loses_the_labs_lock_stops_its_lane_and_fails_before_the_next(
    make_user, settings, tmp_path, monkeypatch
):
    """The lab's lock keeps a second run off the server; once lost (its key gone: Redis
    restarted, the lease ran out) another run may start, so the lane's crowd is stopped and
    the run fails rather than run on beside it."""
    from lab import execute

    settings.VAR_DIR = tmp_path
    # Renewed every second: the loss is seen soon, and a loaded machine still renews in time.
    settings.LOCK_LEASE_SECONDS = 3
    waiting = {"none": "waiting", "db_atomic": "waiting"}
    run = fake_run(make_user(staff=True), status="queued", strategies=["none", "db_atomic"], lane_status=waiting)

    def lane_during_which_the_lock_key_goes(*args, stop, **kwargs):
        locks_redis().delete(resource_keys(execute.LOCK_NAME, key_prefix())[0])
        assert stop.wait(10), "the lane's crowd was never stopped"
        return Result(scenario=run.scenario, strategy="none", product=run.product)

    monkeypatch.setattr(execute, "one_run", lane_during_which_the_lock_key_goes)
    run = execute.lab_run_execute(run_id=run.pk)
    assert run.status == LabRun.Status.FAILED and "LockLost" in run.error, run.error
    first, second = run.lanes.order_by("position")
    assert first.status == LabLane.Status.CANCELLED  # stopped, audited on what it did until then
    assert second.status == LabLane.Status.NOT_RUN


def test_the_lab_is_for_staff_only(client, make_user):
    """Logged out: the site's login, back here after. A buyer: 403, as logging in again as
    the same buyer would only come back here; never the Django admin's login."""
    url = reverse("lab:lab")
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"
    client.force_login(make_user())
    response = client.get(url)
    assert response.status_code == 403
    assert 'data-testid="error-403"' in response.content.decode()
    client.force_login(make_user(staff=True))
    assert client.get(url).status_code == 200


@pytest.mark.parametrize("configured", [TARGET, ""])
@pytest.mark.parametrize("host", ["127.0.0.1:9999", "127.0.0.1:" + "9" * 250])
def test_the_crowd_goes_to_the_configured_target_never_to_the_host_named(
    client, make_user, django_capture_on_commit_callbacks, settings, configured, host
):
    """A foreign Host (even one too long for any column) sends nothing there: the run
    targets LAB_TARGET_URL, or does not start without it."""
    settings.LAB_TARGET_URL = configured
    client.force_login(make_user(staff=True))
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("lab:lab"), FORM, HTTP_HOST=host)
    if configured:
        assert response.status_code == 302, response.content
        assert LabRun.objects.get().target_url == TARGET.rstrip("/")
    else:
        assert response.status_code == 422
        assert not LabRun.objects.exists()


def test_without_a_configured_target_the_lab_starts_nothing(client, make_user, settings):
    settings.LAB_TARGET_URL = ""
    client.force_login(make_user(staff=True))
    response = client.post(reverse("lab:lab"), FORM)
    assert response.status_code == 422
    assert "LAB_TARGET_URL" in response.content.decode()
    assert not LabRun.objects.exists()


LAB_PERMISSIONS = ("lab.view_labrun", "lab.add_labrun", "lab.change_labrun")
FORM = {"product": "voucher", "scenario": "crowd", "strategies": ["none"], "stock": 5, "crowd": 50, "users": 5,
        "duration": 3}  # fmt: skip


def lab_reads(run: LabRun) -> list[str]:
    return [
        reverse("lab:lab"),
        reverse("lab:run", args=[run.pk]),
        reverse("lab:run_live", args=[run.pk]),
        reverse("lab:run_report", args=[run.pk]),
    ]


def test_staff_without_a_lab_permission_can_neither_see_start_nor_cancel_a_run(client, make_user, create):
    run = create(strategies=["none"])
    others = tuple(p for p in STAFF_PERMISSIONS if p not in LAB_PERMISSIONS)
    client.force_login(make_user(staff=True, permissions=others))
    for url in lab_reads(run):
        assert client.get(url).status_code == 403, url
    assert client.post(reverse("lab:lab"), FORM).status_code == 403
    assert client.post(reverse("lab:run_cancel", args=[run.pk])).status_code == 403
    assert 'data-testid="lab-link"' not in client.get("/").content.decode()
    assert list(LabRun.objects.values_list("pk", "status")) == [(run.pk, LabRun.Status.QUEUED)]


def test_viewing_the_lab_is_not_starting_nor_cancelling_a_run(client, make_user, create):
    run = create(strategies=["none"])
    client.force_login(make_user(staff=True, permissions=("lab.view_labrun",)))
    assert client.get(reverse("lab:lab")).status_code == 200
    assert client.get(reverse("lab:run", args=[run.pk])).status_code == 200
    assert client.get(reverse("lab:run_live", args=[run.pk])).status_code == 200
    assert 'data-testid="lab-link"' in client.get("/").content.decode()
    assert 'data-testid="lab-form"' not in client.get(reverse("lab:lab")).content.decode()
    assert 'data-testid="cancel"' not in client.get(reverse("lab:run", args=[run.pk])).content.decode()
    assert client.post(reverse("lab:lab"), FORM).status_code == 403
    assert client.post(reverse("lab:run_cancel", args=[run.pk])).status_code == 403
    assert list(LabRun.objects.values_list("pk", "status")) == [(run.pk, LabRun.Status.QUEUED)]


def test_starting_a_run_needs_the_add_permission_and_cancelling_it_the_change_permission(
    client, make_user, django_capture_on_commit_callbacks
):
    client.force_login(make_user(staff=True, permissions=("lab.add_labrun",)))
    assert 'data-testid="lab-form"' in client.get(reverse("lab:lab")).content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("lab:lab"), FORM)
    assert response.status_code == 302, response.content
    run = LabRun.objects.get()
    client.force_login(make_user(staff=True, permissions=("lab.change_labrun",)))
    assert 'data-testid="cancel"' in client.get(reverse("lab:run", args=[run.pk])).content.decode()
    assert client.post(reverse("lab:run_cancel", args=[run.pk])).status_code == 302
    run.refresh_from_db()
    assert run.status == LabRun.Status.CANCELLED


def test_a_superuser_runs_the_lab_without_any_permission_of_its_own(
    client, make_user, django_capture_on_commit_callbacks
):
    boss = make_user(staff=True, permissions=())
    boss.is_superuser = True
    boss.save(update_fields=["is_superuser"])
    client.force_login(boss)
    assert client.get(reverse("lab:lab")).status_code == 200
    with django_capture_on_commit_callbacks(execute=False):
        assert client.post(reverse("lab:lab"), FORM).status_code == 302
    assert LabRun.objects.get().created_by == boss


def test_the_lab_form_lists_every_strategy_and_scenario_from_the_registries(client, make_user):
    client.force_login(make_user(staff=True))
    page = client.get(reverse("lab:lab")).content.decode()
    for name in strategy_names():
        assert f'value="{name}"' in page
    for scenario in ALL:  # the lifecycle's too
        assert f'value="{scenario}"' in page


def test_the_lab_form_explains_a_refusal_and_keeps_the_input(client, make_user):
    client.force_login(make_user(staff=True))
    response = client.post(
        reverse("lab:lab"),
        {"product": "pool", "scenario": "crowd", "strategies": ["none"], "stock": 5, "crowd": 50, "users": 5,
         "duration": 90},
    )  # fmt: skip
    assert response.status_code == 422
    page = response.content.decode()
    assert "crowd runs against the flash sale" in page
    assert "Ensure this value is less than or equal to 60" in page
    assert 'value="50"' in page  # the crowd as typed
    assert not LabRun.objects.exists()


def test_the_proof_is_public_and_says_when_there_is_no_run_yet(client):
    page = client.get(reverse("lab:proof")).content.decode()
    assert page.count("No run of the flash sale yet") == 1
    assert page.count("No run of the prize draw yet") == 1
    assert 'data-testid="proof-summary"' not in page  # a summary of nothing
    for name in strategy_names():
        assert f"<code>{name}</code>" in page
        assert escape(TEXTS[name].why) in page


def test_the_proof_shows_a_complete_default_run_not_a_later_short_one_unless_published(client, make_user):
    staff = make_user(staff=True)
    complete = fake_run(staff, finished_ago=timedelta(minutes=10))
    short = fake_run(staff, strategies=["none", "db_atomic"], duration=3)
    assert f"Run {complete.pk} (crowd)" in client.get(reverse("lab:proof")).content.decode()
    # Publishing takes the change permission, and a finished run.
    client.force_login(make_user(staff=True, permissions=("lab.view_labrun",)))
    assert client.post(reverse("lab:run_publish", args=[short.pk])).status_code == 403
    client.force_login(make_user(staff=True, permissions=("lab.change_labrun",)))
    cancelled = fake_run(staff, status="cancelled", strategies=["none"])
    assert client.post(reverse("lab:run_publish", args=[cancelled.pk])).status_code == 422
    assert client.post(reverse("lab:run_publish", args=[short.pk])).status_code == 302
    client.logout()
    page = client.get(reverse("lab:proof")).content.decode()
    assert f"Run {short.pk} (crowd)" in page and f"Run {complete.pk} (crowd)" not in page
    # A complete run after it is the proof again.
    newer = fake_run(staff)
    assert f"Run {newer.pk} (crowd)" in client.get(reverse("lab:proof")).content.decode()


def test_the_proof_finds_its_complete_run_behind_any_number_of_newer_partial_ones_at_a_fixed_cost(make_user):
    """Newer runs that do not qualify (a strategy not run to its end, a run of one strategy)
    hid the proof once there were 20 of them, and each cost its lanes' series to look at."""
    staff = make_user(staff=True)
    proof = fake_run(staff, finished_ago=timedelta(hours=1))
    fake_run(staff, lane_status={"none": "not_run"}, finished_ago=timedelta(minutes=59))

    def proof_read() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as queries:
            pk = lab_run_proof(product="voucher").pk
        return pk, len(queries)

    behind_one = proof_read()
    for minutes in range(25):
        fake_run(staff, strategies=["none"], finished_ago=timedelta(minutes=minutes))
    assert proof_read() == behind_one == (proof.pk, behind_one[1])


def test_the_proofs_choice_reads_a_row_of_an_index_behind_thousands_of_runs(make_user):
    """A site with history: 3,000 finished runs of 8 lanes each, none that qualifies, newer than
    the proof. Each query that chooses the proof reads its run on an index, never a table
    whole: read newest first until one qualified, the choice once looked at every newer run
    and three times at its lanes; a NOT EXISTS over the lanes before that, at every lane ever
    run."""
    staff = make_user(staff=True)
    proof = fake_run(staff, finished_ago=timedelta(days=1))
    now = timezone.now()
    runs = LabRun.objects.bulk_create(
        LabRun(
            product="voucher", scenario="crowd", target_url="http://127.0.0.1:8000", status="done",
            server_processes=2, database="mysql", commit="abc123", machine="2 cores", race_window_ms=20,
            created_by=staff, folder=f"history-{n}", started_at=now, finished_at=now - timedelta(seconds=n),
            buckets=1, hold_seconds=0, **DEFAULTS,
        )
        for n in range(3000)
    )  # fmt: skip
    LabLane.objects.bulk_create(
        LabLane(run=run, position=at, strategy="none", status="not_run", buckets=1)
        for run in runs
        for at in range(1, 9)
    )
    with CaptureQueriesContext(connection) as chose:
        assert lab_run_proof(product="voucher").pk == proof.pk
    choices = [query["sql"] for query in chose.captured_queries if ".`proves` = " in query["sql"]]
    assert len(choices) == 1
    (read,) = explain(choices[0])
    assert (read["key"], read["type"], int(read["rows"])) == ("lab_run_proves", "ref", 1), read
    for query in chose.captured_queries:
        plan = explain(query["sql"])
        assert not [step for step in plan if step["type"] == "ALL"], (query["sql"], plan)


def test_the_proof_opens_with_a_line_per_strategy_linked_to_its_card_and_the_card_to_its_item(client, make_user):
    run = fake_run(make_user(staff=True), item_id=7)
    page = client.get(reverse("lab:proof")).content.decode()
    summary = page[page.index('data-testid="summary-voucher"') : page.index("</table>")]
    assert summary.count('data-testid="summary-row"') == len(strategy_names())
    for lane in run.lanes.all():
        assert f'href="#proof-voucher-{lane.strategy}"' in summary
        assert f'id="proof-voucher-{lane.strategy}"' in page
    assert f"{100 + OVERSOLD} of 100" in summary and "broke as expected" in summary and "holds" in summary
    assert page.index('data-testid="proof-summary"') < page.index('data-testid="proof-1"')
    assert page.count(f'href="{reverse("pages:voucher_detail", args=[7])}"') == len(strategy_names())


def test_a_cancelled_run_says_so_and_its_strategies_that_never_ran_say_not_run(client, make_user):
    staff = make_user(staff=True)
    lanes = {"none": "cancelled", "local": "not_run", "db_atomic": "not_run"}
    run = fake_run(staff, status="cancelled", strategies=list(lanes), lane_status=lanes)
    client.force_login(staff)
    page = client.get(reverse("lab:run", args=[run.pk])).content.decode()
    assert '<strong data-testid="run-status">cancelled</strong>' in page
    assert "failed" not in page
    assert page.count("not run: the run ended before its turn") == 2
    assert page.count("0 of 0") == 0
    assert page.count("none: it never ran") == 2  # the matrix: no figures of zeros
    assert "cancelled after 10 s" in page


@pytest.mark.parametrize(
    ("scenario", "shown"), [("crowd", "<dd>not tried in this scenario</dd>"), ("hammer", "<dd>0</dd>")]
)
def test_duplicate_orders_are_not_tried_where_nobody_buys_twice(client, make_user, scenario, shown):
    staff = make_user(staff=True)
    run = fake_run(staff, scenario=scenario, strategies=["db_atomic"])
    client.force_login(staff)
    page = client.get(reverse("lab:run", args=[run.pk])).content.decode()
    card = page[page.index('data-testid="lane-db_atomic"') : page.index("</article>")]
    duplicates = card[card.index("<dt>duplicate orders</dt>") :]
    assert duplicates.split("</div>")[0].endswith(shown)


def test_the_report_of_a_run_without_one_is_not_found(client, make_user, create):
    run = create()
    client.force_login(make_user(staff=True))
    assert client.get(reverse("lab:run_report", args=[run.pk])).status_code == 404


def test_the_home_page_says_what_the_application_demonstrates_and_links_the_proof(client):
    page = client.get("/").content.decode()
    assert "which strategies sell more than there is and which never do" in page
    assert f'href="{reverse("lab:proof")}"' in page


def test_staff_cancel_a_run_and_its_task_then_leaves_it_alone(client, make_user, create):
    from lab.execute import lab_run_execute

    run = create(strategies=["none"])
    client.force_login(make_user(staff=True))
    response = client.post(reverse("lab:run_cancel", args=[run.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == LabRun.Status.CANCELLED and run.error.startswith("Cancelled by")
    assert lab_run_execute(run_id=run.pk).status == LabRun.Status.CANCELLED  # the task, arriving late
    assert run.lanes.get().status == LabLane.Status.NOT_RUN
    assert create().status == LabRun.Status.QUEUED  # the lab is free again


def test_a_run_cancelled_while_its_last_lane_ends_stays_cancelled(create, make_user, monkeypatch):
    """Cancel and the task's own end race: the run must not come out "done" (and so become
    the public proof) after staff cancelled it."""
    from lab import execute, services

    staff = make_user(staff=True)
    run = create(strategies=["none"])

    def lanes_cancelled_meanwhile(running, *args):  # stands for the lanes, during which staff cancel
        services.lab_run_cancel(run=LabRun.objects.get(pk=running.pk), user=staff)

    monkeypatch.setattr(execute, "_run_lanes", lanes_cancelled_meanwhile)
    assert execute.lab_run_execute(run_id=run.pk).status == LabRun.Status.CANCELLED
    run.refresh_from_db()
    assert run.status == LabRun.Status.CANCELLED and run.error.startswith("Cancelled by")


def test_a_run_cancelled_while_its_task_starts_it_stays_cancelled_and_runs_no_lane(create, make_user, monkeypatch):
    """The task reads the run queued, staff cancel, then the task starts it: it must not set
    the run running again and carry out lanes already marked not run."""
    from lab import execute, services

    staff = make_user(staff=True)
    run = create(strategies=["none"])
    lanes_run = []

    def commit_read_while_staff_cancel():  # the task's start, during which staff cancel
        services.lab_run_cancel(run=LabRun.objects.get(pk=run.pk), user=staff)
        return "abc123"

    monkeypatch.setattr(execute, "git_commit", commit_read_while_staff_cancel)
    monkeypatch.setattr(execute, "_run_lanes", lambda running, *args: lanes_run.append(running))
    assert execute.lab_run_execute(run_id=run.pk).status == LabRun.Status.CANCELLED
    assert lanes_run == []
    run.refresh_from_db()
    assert run.status == LabRun.Status.CANCELLED and run.error.startswith("Cancelled by")
    assert run.lanes.get().status == LabLane.Status.NOT_RUN


def test_a_lane_judged_not_proven_shows_neither_broken_nor_holding(client, make_user):
    """Audited while its figures still changed, a safe lane proves nothing either way: its card,
    its chip and its line on /proof/ say so, not red as broken, nor green."""
    staff = make_user(staff=True)
    run = fake_run(staff, strategies=["db_atomic"])
    said = f"{NOT_PROVEN}: audit incomplete, still changing when audited"  # as judge says it
    LabLane.objects.filter(pk=run.lanes.get().pk).update(verdict=said, ok=False)
    lane = run.lanes.get()
    assert (lane.broken, lane.unproven, lane.state) == (False, True, "unproven")
    client.force_login(staff)
    assert 'data-state="unproven"' in client.get(reverse("lab:run", args=[run.pk])).content.decode()


def test_a_safe_lane_whose_verdict_failed_shows_broken_though_no_counter_is_above_zero(client, make_user):
    """Confirmations lost, stock not adding up, the history, Redis' drift: a failed verdict
    with no counter of the card's own showed green, holding."""
    staff = make_user(staff=True)
    run = fake_run(staff, strategies=["db_atomic"])
    lane = run.lanes.get()
    assert lane.state == "holding"
    LabLane.objects.filter(pk=lane.pk).update(verdict="BROKEN: confirmations lost", ok=False)
    lane = run.lanes.get()
    assert (lane.broken, lane.state) == (True, "broken")
    client.force_login(staff)
    assert 'data-state="broken"' in client.get(reverse("lab:run", args=[run.pk])).content.decode()
