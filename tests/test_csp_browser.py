"""The Content-Security-Policy in a real browser: every page, the admin and /api/docs work
under it and the browser reports no violation (a blocked script, style or image)."""

from __future__ import annotations

import os

import pytest

from lottery.models import Draw
from orders.models import Order

from . import test_browser
from .test_browser import PASSWORD

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import expect  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Runs before any script of the page, outside its policy: every violation the page meets.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} ${e.sample || ""}`);
});
"""


browser = test_browser.browser


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    page.set_default_timeout(10_000)
    console = []
    page.on("console", lambda message: console.append(message.text))
    page.console = console
    yield page
    context.close()


def assert_no_violation(page) -> None:
    violations = page.evaluate("window.__violations")
    reported = [text for text in page.console if "Content Security Policy" in text]
    assert not violations and not reported, (violations, reported)


def log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_test_id("logout")).to_contain_text(username)
    assert_no_violation(page)


def test_buying_and_drawing_work_under_the_policy(page, live_server, make_user, make_voucher, make_pool):
    user = make_user("alice")
    voucher = make_voucher(stock=3, title="Coffee for 1 cent")
    pool = make_pool(prizes=(("Gold", 1), ("Silver", 3)), no_prize_weight=4)
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/")
    page.get_by_role("link", name="Coffee for 1 cent").click()
    page.get_by_test_id("buy").click()
    expect(page.locator("[data-outcome=bought]")).to_be_visible()
    assert Order.objects.filter(user=user, voucher=voucher).exists()
    page.goto(f"{live_server.url}/pools/{pool.pk}/")
    # The odds bars are drawn at their probability, with no inline style.
    bar = page.get_by_test_id("no-prize").locator(".odds-bar")
    fill = bar.locator("rect")
    ratio = fill.evaluate("r => r.getBoundingClientRect().width") / bar.evaluate("b => b.getBoundingClientRect().width")
    assert ratio == pytest.approx(0.5, abs=0.02)
    page.get_by_test_id("draw").click()
    expect(page.locator("#outcome [data-outcome]")).to_be_visible()
    assert Draw.objects.filter(user=user, pool=pool).count() == 1
    page.goto(f"{live_server.url}/orders/")
    page.goto(f"{live_server.url}/proof/")
    page.goto(f"{live_server.url}/no-such-page/")
    assert_no_violation(page)


def test_the_admin_and_the_lab_work_under_the_policy(page, live_server, make_user, make_voucher, make_pool):
    boss = make_user("boss", staff=True)
    boss.is_superuser = True
    boss.save()
    voucher = make_voucher()
    pool = make_pool()
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill("boss")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#site-name")).to_be_visible()
    for path in (
        "/admin/",
        "/admin/orders/voucher/",
        "/admin/orders/voucher/add/",
        f"/admin/orders/voucher/{voucher.pk}/change/",
        f"/admin/lottery/pool/{pool.pk}/change/",
        "/admin/auth/user/",
        "/lab/",
    ):
        page.goto(f"{live_server.url}{path}")
        assert_no_violation(page)
    # The admin's own scripts run: the calendar widget opens.
    page.goto(f"{live_server.url}/admin/orders/voucher/add/")
    page.locator(".datetimeshortcuts a").first.click()
    assert_no_violation(page)


def test_the_api_docs_render_and_try_a_call_under_their_policy(page, live_server, make_voucher):
    make_voucher(title="Docs voucher")
    page.goto(f"{live_server.url}/api/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Flash sales and prize draws API")
    listing = page.locator("#operations-vouchers-orders_api_vouchers_list")
    listing.locator(".opblock-summary").click()
    listing.get_by_role("button", name="Try it out").click()
    listing.get_by_role("button", name="Execute").click()
    expect(listing.locator(".response-col_description .microlight, .highlight-code").first).to_contain_text(
        "Docs voucher"
    )
    login = page.locator("#operations-auth-accounts_api_auth_login")
    login.locator(".opblock-summary").click()
    login.get_by_role("button", name="Try it out").click()
    expect(login.locator("textarea.body-param__text")).to_be_visible()
    page.locator(".auth-wrapper .authorize").click()
    expect(page.locator(".modal-ux")).to_be_visible()
    expect(page.locator("section.models")).to_be_visible()
    assert_no_violation(page)
