"""The lab's and the proof's pages in headless Chromium, at 1280 and 390 px: what a
newcomer sees, measured (widths, heights, computed colours), on runs written to the
database (``tests/lab/fakeruns.py``)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from inventory.strategies import strategy_names
from lab.execute import lab_dir
from lab.models import LabRun
from loadtests.report import render_report
from tests import test_browser
from tests.lab.fakeruns import fake_result, fake_run
from tests.test_browser import log_in

browser = test_browser.browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RED = "rgb(179, 38, 30)"  # the lab's "broken" (#b3261e)


@pytest.fixture
def at(browser, live_server):
    """A page of the given width (a phone's by default) on the live server."""
    contexts = []

    def at(width: int = 390):
        context = browser.new_context(viewport={"width": width, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        return page

    yield at
    for context in contexts:
        context.close()


def test_logged_out_the_lab_sends_to_the_sites_login(at, live_server):
    page = at()
    page.goto(f"{live_server.url}/lab/")
    assert page.url == f"{live_server.url}/login/?next=/lab/"


def test_the_form_offers_the_chosen_products_scenarios_and_its_inputs_are_one_height(at, live_server, make_user):
    make_user("lab-staff", staff=True)
    page = at(1280)
    log_in(page, live_server, "lab-staff")
    page.goto(f"{live_server.url}/lab/")
    scenario = page.locator("select[name=scenario]")
    expect(scenario).to_have_value("crowd")
    page.get_by_label("Prize draw").check()
    expect(scenario).to_have_value("draw-crowd")
    offered = scenario.evaluate("s => [...s.options].filter(o => !o.hidden && !o.disabled).map(o => o.value)")
    assert offered == ["draw-crowd", "draw-hammer", "draw-abandon", "claim-race"]
    page.get_by_label("Flash sale").check()
    expect(scenario).to_have_value("crowd")
    heights = {
        name: page.locator(f"[name={name}]").evaluate("e => e.getBoundingClientRect().height")
        for name in ("scenario", "stock", "crowd", "users", "duration")
    }
    assert max(heights.values()) - min(heights.values()) < 1, heights


def test_cancelling_asks_first_then_says_cancelled(at, live_server, make_user):
    staff = make_user("lab-staff", staff=True)
    run = fake_run(staff, status="running", strategies=["none", "db_atomic"], lane_status={"db_atomic": "waiting"})
    page = at(1280)
    log_in(page, live_server, "lab-staff")
    page.goto(f"{live_server.url}{reverse('lab:run', args=[run.pk])}")
    questions = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.get_by_test_id("cancel").click()
    expect(page.get_by_test_id("run-status")).to_have_text("running")
    assert questions and "Cancel run" in questions[0]
    run.refresh_from_db()
    assert run.status == LabRun.Status.RUNNING
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("cancel").click()
    expect(page.get_by_test_id("run-status")).to_have_text("cancelled")
    expect(page.get_by_test_id("lane-db_atomic")).to_contain_text("not run")


def test_on_a_phone_the_matrix_and_past_runs_show_the_verdict_without_a_sideways_scroller(at, live_server, make_user):
    staff = make_user("lab-staff", staff=True)
    run = fake_run(staff)
    held = fake_run(staff, scenario="pay-race", strategies=["none", "db_atomic"])
    split = fake_run(staff, strategies=["none", "db_pessimistic"], buckets=8)
    page = at(390)
    log_in(page, live_server, "lab-staff")
    for path, table in (
        (reverse("lab:run", args=[held.pk]), "matrix"),  # the lifecycle's columns too
        (reverse("lab:run", args=[split.pk]), "matrix"),  # the buckets' too
        (reverse("lab:run", args=[split.pk]), "side-by-side"),
        (reverse("lab:run", args=[run.pk]), "matrix"),
        (reverse("lab:lab"), "runs"),
    ):
        page.goto(f"{live_server.url}{path}")
        box = page.get_by_test_id(table)
        assert box.evaluate("e => e.scrollWidth <= e.parentElement.clientWidth"), f"{table} scrolls sideways"
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.goto(f"{live_server.url}{reverse('lab:run', args=[run.pk])}")
    rows = page.get_by_test_id("matrix").locator("tbody tr")
    verdict = rows.first.locator(".verdict-cell")
    expect(verdict).to_contain_text("broke as expected")
    right = verdict.evaluate("e => e.getBoundingClientRect().right")
    assert right <= 390
    heights = rows.evaluate_all("rows => rows.map(r => r.getBoundingClientRect().height)")
    assert max(heights) <= 1.3 * min(heights), heights  # none's row no taller than a safe one's


@pytest.mark.parametrize("width", [1280, 390])
def test_a_lifecycle_runs_matrix_fits_its_column_without_a_scroller(at, live_server, make_user, width):
    """A lifecycle run's matrix has some twenty columns: it fits the page's column, its
    last column within the column's edge, rather than scrolling sideways in a box of its own."""
    staff = make_user("lab-staff", staff=True)
    held = fake_run(staff, scenario="abandon")
    fake_run(staff, scenario="pay-race", item_id=1)
    page = at(width)
    log_in(page, live_server, "lab-staff")
    page.goto(f"{live_server.url}{reverse('lab:run', args=[held.pk])}")
    matrix = page.get_by_test_id("matrix")
    expect(matrix).to_contain_text("returned twice")
    column = page.locator("main")
    assert matrix.evaluate("(m, c) => m.getBoundingClientRect().right <= c.getBoundingClientRect().right + 1",
                           column.element_handle()), "the matrix runs past its column"  # fmt: skip
    assert matrix.evaluate("e => e.scrollWidth <= e.parentElement.clientWidth"), "the matrix scrolls sideways"
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # The proof's lifecycle section fits too.
    page.goto(f"{live_server.url}/proof/")
    expect(page.get_by_test_id("proof-lifecycle-voucher")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_full_report_fits_1280_px_and_colours_as_the_run_page_does(at, live_server, make_user, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    staff = make_user("lab-staff", staff=True)
    run = fake_run(staff)
    lab_dir(run).mkdir(parents=True)
    results = [fake_result(name) for name in strategy_names()]
    (lab_dir(run) / "report.html").write_text(
        render_report(results, {"lab run": run.pk}, locust_href=lambda result: f"locust/{result.strategy}")
    )
    (lab_dir(run) / "none").mkdir()
    (lab_dir(run) / "none" / "locust.html").write_text("<html>Locust</html>")
    page = at(1280)
    log_in(page, live_server, "lab-staff")
    page.goto(f"{live_server.url}{reverse('lab:run', args=[run.pk])}")
    run_page_red = page.get_by_test_id("lane-none").get_by_test_id("verdict").evaluate("e => getComputedStyle(e).color")
    page.goto(f"{live_server.url}{reverse('lab:run_report', args=[run.pk])}")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    broke = page.locator("td.verdict", has_text="broke as expected").first
    assert broke.evaluate("e => getComputedStyle(e).color") == run_page_red == RED
    held = page.locator("td.verdict", has_text="holds").first
    assert held.evaluate("e => getComputedStyle(e).color") == "rgb(27, 122, 58)"
    # Not measured in the lab: no CPU column of zeros.
    assert "CPU ms/req" not in page.content()
    # Red lines are the strategies that broke, and only they.
    strokes = page.locator("svg").nth(2).locator("polyline").evaluate_all("ls => ls.map(l => l.getAttribute('stroke'))")
    reds = {"#d62728", "#8c1d18", "#e8575a", "#b5179e"}
    assert [stroke in reds for stroke in strokes[: len(results)]] == [not r.ok or bool(r.oversold) for r in results]
    with page.expect_download() as download:
        page.get_by_role("link", name="none", exact=True).click()
    assert download.value.suggested_filename == f"lab-run-{run.pk}-none-locust.html"
    # And it leads back to its run, and to the lab.
    back = page.get_by_test_id("report-back")
    expect(back.get_by_role("link", name="Race lab")).to_have_attribute("href", reverse("lab:lab"))
    back.get_by_role("link", name=f"Run {run.pk}").click()
    assert page.url == f"{live_server.url}{reverse('lab:run', args=[run.pk])}"


@pytest.mark.parametrize("width", [1280, 390])
def test_the_scenarios_and_what_they_prove_are_read_whole_at_every_width(at, live_server, make_user, width):
    """What a scenario proves was once its option's text, cut off at a phone's width: the
    select names the scenarios, and what each proves is written out beside it, wrapping."""
    make_user("lab-staff", staff=True)
    page = at(width)
    log_in(page, live_server, "lab-staff")
    page.goto(f"{live_server.url}/lab/")
    select = page.locator("select[name=scenario]")
    explained = page.get_by_test_id("scenarios-explained")
    for label, first in (("Prize draw", "draw-crowd"), ("Flash sale", "crowd")):
        page.get_by_label(label).check()
        expect(select).to_have_value(first)
        # The longest offered option's text, in the select's font, fits the select's box.
        cut = select.evaluate("""s => {
            const style = getComputedStyle(s), pen = document.createElement("canvas").getContext("2d");
            pen.font = `${style.fontSize} ${style.fontFamily}`;
            const room = s.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 24;
            return [...s.options].filter(o => !o.hidden).map(o => o.text).filter(t => pen.measureText(t).width > room);
        }""")
        assert not cut, f"cut off in the select: {cut}"
        shown = explained.locator("[data-scenario]:visible")
        offered = select.evaluate("s => [...s.options].filter(o => !o.hidden).map(o => o.value)")
        assert shown.evaluate_all("es => es.map(e => e.dataset.scenario)") == offered
        for entry in shown.all():
            box = entry.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width
            assert entry.evaluate("e => e.scrollWidth <= e.clientWidth")
        expect(explained.locator(f"[data-scenario={first}]")).to_have_class("chosen")
    select.select_option("hammer")
    expect(explained.locator("[data-scenario=hammer]")).to_have_class("chosen")
    expect(explained.locator("[data-scenario=crowd]")).not_to_have_class("chosen")
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_proof_opens_with_a_summary_that_fits_one_screen(at, live_server, make_user):
    staff = make_user("lab-staff", staff=True)
    fake_run(staff, item_id=1)
    fake_run(staff, product="pool", scenario="draw-crowd", item_id=1)
    # Each product's lifecycle proof beside its crowd's, in the same screen.
    fake_run(staff, scenario="pay-race", item_id=1)
    fake_run(staff, product="pool", scenario="claim-race", item_id=1)
    # And the latest bucketed run: every strategy on one row and on buckets.
    fake_run(staff, buckets=8, item_id=1)
    page = at(1280)
    page.goto(f"{live_server.url}/proof/")
    summary = page.get_by_test_id("proof-summary").evaluate("e => e.getBoundingClientRect().bottom")
    assert summary <= 900, f"the summary ends {summary:.0f}px down"
    page.get_by_test_id("summary-voucher").get_by_role("link", name="none").click()
    assert page.url.endswith("#proof-voucher-none")
    card = page.locator("#proof-voucher-none")
    expect(card.get_by_test_id("item-link")).to_contain_text("beyond its stock")
    phone = at(390)
    phone.goto(f"{live_server.url}/proof/")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    verdict = phone.get_by_test_id("summary-voucher").locator(".verdict-cell").first
    assert verdict.evaluate("e => e.getBoundingClientRect().right") <= 390
    verdict = phone.get_by_test_id("summary-lifecycle-pool").locator(".verdict-cell").first
    assert verdict.evaluate("e => e.getBoundingClientRect().right") <= 390
    expect(phone.get_by_test_id("summary-lifecycle-voucher").locator("li.bad").first).to_contain_text("none")
    line = phone.get_by_test_id("summary-buckets-voucher")
    assert line.evaluate("e => e.getBoundingClientRect().right") <= 390
    expect(phone.get_by_test_id("proof-buckets-voucher").get_by_test_id("bucket-chart").first).to_be_visible()


def test_a_lane_chart_has_intermediate_ticks_a_labelled_supply_and_the_crowds_seconds(at, live_server, make_user):
    staff = make_user("lab-staff", staff=True)
    run = fake_run(staff, strategies=["none"])
    page = at(1280)
    log_in(page, live_server, "lab-staff")
    page.goto(f"{live_server.url}{reverse('lab:run', args=[run.pk])}")
    svg = page.get_by_test_id("lane-none").locator("svg")
    labels = svg.locator("text").evaluate_all("ts => ts.map(t => t.textContent)")
    assert {"0", "50", "100", "150", "200"} <= set(labels)  # y: 189 orders
    assert {"0", "5", "10"} <= set(labels)  # x: seconds, the crowd's 10 marked
    assert "supply" in labels and "crowd stops" in labels


BUTTON_LOOK = """e => {
    const s = getComputedStyle(e);
    return {padding: parseFloat(s.paddingLeft), border: parseFloat(s.borderTopWidth), radius: s.borderTopLeftRadius,
            edge: s.borderTopColor, fill: s.backgroundColor, underline: s.textDecorationLine};
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_publish_and_cancel_look_like_the_labs_run_button(at, live_server, make_user, width):
    """Set beside the run's status line, plain text would read as part of it: each action is
    a button, with the run button's corners and colour (a filled one, an outlined one)."""
    staff = make_user("lab-staff", staff=True)
    done = fake_run(staff, strategies=["none", "db_atomic"])
    page = at(width)
    log_in(page, live_server, "lab-staff")
    page.goto(f"{live_server.url}/lab/")
    run_button = page.locator("button.run").evaluate(BUTTON_LOOK)  # enabled: no run is under way yet
    running = fake_run(staff, status="running", strategies=["none", "db_atomic"], lane_status={"db_atomic": "waiting"})
    page.goto(f"{live_server.url}{reverse('lab:run', args=[done.pk])}")
    publish = page.get_by_test_id("publish").evaluate(BUTTON_LOOK)
    page.goto(f"{live_server.url}{reverse('lab:run', args=[running.pk])}")
    cancel = page.get_by_test_id("cancel").evaluate(BUTTON_LOOK)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for look in (publish, cancel):
        assert look["padding"] >= 8 and look["border"] >= 1 and look["underline"] == "none", look
        assert look["radius"] == run_button["radius"], (look, run_button)
        assert look["edge"] == run_button["fill"], (look, run_button)
    assert publish["fill"] == run_button["fill"]


@pytest.mark.parametrize("width", [1280, 390])
def test_the_supply_label_stays_clear_of_the_title_when_the_supply_is_the_charts_top(at, live_server, make_user, width):
    staff = make_user("lab-staff", staff=True)
    run = fake_run(staff, strategies=["db_atomic"], stock=100)  # sells its 100: the supply is the top tick
    page = at(width)
    log_in(page, live_server, "lab-staff")
    page.goto(f"{live_server.url}{reverse('lab:run', args=[run.pk])}")
    svg = page.get_by_test_id("lane-db_atomic").locator("svg")
    expect(svg.locator("text.dashed-label")).to_have_text("supply")
    title, label = (svg.locator(f"text.{name}").bounding_box() for name in ("title", "dashed-label"))
    top_tick = svg.locator("text", has_text="100").first.bounding_box()
    assert abs(label["y"] - top_tick["y"]) < 20, "the supply is not at the top: this test shows nothing"
    assert label["y"] >= title["y"] + title["height"], (title, label)


@pytest.mark.parametrize("width", [1280, 390])
def test_the_surge_at_the_take_and_through_the_waiting_room_stand_side_by_side(at, live_server, make_user, width):
    staff = make_user("lab-staff", staff=True)
    fake_run(staff, item_id=1)
    fake_run(staff, scenario="surge", strategies=["db_atomic"], item_id=1)
    fake_run(staff, scenario="surge-queue", strategies=["db_atomic"], item_id=1)
    page = at(width)
    page.goto(f"{live_server.url}/proof/")
    surge = page.get_by_test_id("proof-surge")
    expect(surge).to_contain_text("At the take at once")
    expect(surge).to_contain_text("Through the waiting room")
    labels = surge.get_by_test_id("surge-counter").locator("dt").all_inner_texts()
    assert labels.count("take p99") == 2 and labels.count("inversions") == 1, labels
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for counter in surge.get_by_test_id("surge-counter").all():
        assert counter.evaluate("e => e.getBoundingClientRect().right") <= width
    # The crowd's proof is still the crowd's run: a surge never replaces it.
    expect(page.locator("#proof-voucher > p").first).to_contain_text("(crowd)")
