"""What a newcomer met in Chromium, measured there: a page restored by Back showing stale stock,
a strategy switch that acted without asking, a reason said twice beside its outcome, the
admin's pool page stretched by its prize rows, and the API's documentation without a
viewport on a phone."""

from __future__ import annotations

from playwright.sync_api import expect

from lottery.models import Pool
from orders.models import Order
from tests import test_browser
from tests.test_browser import PASSWORD, log_in
from tests.test_pages import api_purchase, browser_test

# Chromium and a phone-sized page (390 x 844), registered here too: pytest finds fixtures by name.
browser = test_browser.browser
page = test_browser.page

# Under a poll's 2 s: an answer this fast came from the restored page itself, not its next poll.
BEFORE_A_POLL = 1_000


@browser_test
def test_back_to_a_voucher_page_shows_the_stock_as_it_is_now(page, live_server, make_user, make_voucher):
    user = make_user("hana")
    voucher = make_voucher(stock=20, title="Twenty left")
    log_in(page, live_server, "hana")
    response = page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    expect(page.get_by_test_id("stock")).to_have_text("20")
    expect(page.get_by_test_id("buy")).to_be_enabled()
    page.get_by_role("link", name="My orders").click()
    expect(page.get_by_role("heading", name="My orders")).to_be_visible()
    # Bought while the voucher page was not in view (another tab, the API).
    assert api_purchase(live_server, user, voucher) == 201
    page.go_back()
    expect(page.get_by_test_id("stock")).to_have_text("19", timeout=BEFORE_A_POLL)
    expect(page.get_by_test_id("buy")).to_be_disabled(timeout=BEFORE_A_POLL)
    page.reload()
    expect(page.get_by_test_id("stock")).to_have_text("19", timeout=BEFORE_A_POLL)
    assert "no-store" in response.headers.get("cache-control", "")


@browser_test
def test_the_strategy_switch_asks_before_it_acts(page, live_server, make_user, make_pool):
    make_user("ivan", staff=True)
    pool = make_pool(strategy="db_atomic", name="Ask first")
    log_in(page, live_server, "ivan")
    page.goto(f"{live_server.url}/pools/{pool.pk}/")
    page.get_by_label("Switch to").select_option("none")
    questions = []

    def answer(dialog, accept: bool) -> None:
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, accept=False))
    page.get_by_role("button", name="Switch").click()
    assert questions == [
        "Switch “Ask first” from db_atomic to none? "
        "Every purchase and draw from now on is taken under the new strategy."
    ]
    expect(page.get_by_test_id("strategy")).to_have_text("db_atomic")
    assert Pool.objects.get(pk=pool.pk).strategy == "db_atomic"

    page.once("dialog", lambda dialog: answer(dialog, accept=True))
    page.get_by_role("button", name="Switch").click()
    expect(page.get_by_test_id("strategy")).to_have_text("none")
    assert len(questions) == 2
    assert Pool.objects.get(pk=pool.pk).strategy == "none"


@browser_test
def test_after_buying_the_outcome_alone_says_it(page, live_server, make_user, make_voucher):
    user = make_user("jo")
    voucher = make_voucher(stock=3)
    log_in(page, live_server, "jo")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    page.get_by_test_id("buy").click()
    expect(page.locator("[data-outcome=bought]")).to_be_visible()
    expect(page.get_by_test_id("buy")).to_be_disabled()
    expect(page.get_by_test_id("buy-reason")).to_be_hidden()
    assert page.locator("a:visible", has_text="See my orders").count() == 1
    page.reload()  # the outcome is gone: the button's reason says it
    expect(page.get_by_test_id("buy-reason")).to_be_visible()
    expect(page.get_by_test_id("buy-reason")).to_contain_text("You bought this voucher")
    assert Order.objects.filter(user=user, voucher=voucher).count() == 1


@browser_test
def test_a_press_the_server_refuses_outside_the_documented_answers_says_so(page, live_server, make_user, make_voucher):
    """htmx swaps 2xx answers only: a Buy answered 404 (the sale taken down since the page
    loaded) showed nothing and enabled its button again, as if it had not been pressed."""
    from orders.models import Voucher

    make_user("kim")
    voucher = make_voucher(stock=3)
    log_in(page, live_server, "kim")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    expect(page.get_by_test_id("buy")).to_be_enabled()
    Voucher.objects.filter(pk=voucher.pk).update(listed=False)  # unlisted: 404 to buyers
    page.get_by_test_id("buy").click()
    expect(page.get_by_test_id("press-failed")).to_contain_text("Not found")
    assert not Order.objects.filter(voucher=voucher).exists()


def admin_page(browser, live_server, make_user, *, width: int):
    admin = make_user("root", staff=True)
    admin.is_superuser = True
    admin.save()
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/admin/login/")
    page.locator("#id_username").fill("root")
    page.locator("#id_password").fill(PASSWORD)
    page.locator("input[type=submit]").click()
    return context, page


@browser_test
def test_the_pool_change_page_fits_1280_pixels_with_its_prizes(browser, live_server, make_user, make_pool):
    pool = make_pool(prizes=(("A weekend trip for two to the seaside", 1), ("Headphones", 5), ("Tote bag", 20)))
    context, page = admin_page(browser, live_server, make_user, width=1280)
    page.goto(f"{live_server.url}/admin/lottery/pool/{pool.pk}/change/")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1280, f"the pool's change page is {width}px wide at 1280px"
    restock = page.get_by_role("link", name="Restock", exact=True).first
    box = restock.bounding_box()
    assert box["x"] + box["width"] <= 1280
    expect(page.locator("input[name=prizes-0-initial_stock]")).to_be_disabled()
    expect(page.locator("input[name=prizes-3-initial_stock]")).to_be_enabled()
    context.close()


@browser_test
def test_the_api_documentation_is_laid_out_for_a_phone_and_leads_back(browser, live_server):
    # A phone's browser lays out a page without a viewport tag 980 px wide, then shrinks it.
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(f"{live_server.url}/api/docs")
    expect(page.locator("#swagger-ui .info")).to_be_visible()
    assert page.evaluate("document.documentElement.clientWidth") == 390
    page.get_by_test_id("site-link").click()
    expect(page.get_by_role("heading", name="Sales")).to_be_visible()
    page.get_by_test_id("api-docs-link").click()
    expect(page.locator("#swagger-ui .info")).to_be_visible()
    context.close()


WIDEST = """() => [...document.querySelectorAll('#swagger-ui *')]
    .map(e => [Math.round(e.getBoundingClientRect().right), e.className])
    .sort((a, b) => b[0] - a[0]).slice(0, 3)"""


@browser_test
def test_an_opened_operation_of_the_api_documentation_fits_the_width(browser, live_server):
    """An operation's responses table (code, description with its example, links) laid out
    at its content's width pushed a phone's page out to some 720 px."""
    for width in (1280, 390):
        context = browser.new_context(viewport={"width": width, "height": 844}, is_mobile=width < 600)
        page = context.new_page()
        page.goto(f"{live_server.url}/api/docs")
        operations = page.locator("#swagger-ui .opblock")
        expect(operations.first).to_be_visible()
        # Every operation opened at once (one click each, in the page), then waited for together:
        # a click and a wait per operation took over a minute for the API's forty-odd.
        opened = page.evaluate(
            "() => [...document.querySelectorAll('#swagger-ui .opblock-summary-control')].map(c => c.click()).length"
        )
        assert opened == operations.count()
        expect(page.locator("#swagger-ui .opblock:not(:has(.responses-table))")).to_have_count(0)
        widest = page.evaluate("""() => [...document.querySelectorAll('#swagger-ui *')]
            .map(e => [Math.round(e.getBoundingClientRect().right), e.className])
            .sort((a, b) => b[0] - a[0]).slice(0, 5)""")
        assert page.evaluate("document.documentElement.scrollWidth") <= width, widest
        context.close()
