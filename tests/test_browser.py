"""The pages in a real browser: Debian's Chromium driven by Playwright.

The server is pytest-django's live server on the MariaDB test database.
"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta

import pytest

from inventory.models import Stock
from orders.models import Order

# Playwright's sync API runs an event loop in this thread; the ORM calls in the
# tests are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import expect, sync_playwright  # noqa: E402

from tests.stock import stock_left, stock_row

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "pw-for-tests-1"


class Chromium:
    """A module's Chromium, launched again for the next context when it has died: a crash of
    the browser fails the test it happened in, not every test of the module after it."""

    def __init__(self, playwright) -> None:
        self.playwright = playwright
        self.browser = None

    def new_context(self, **options):
        if self.browser is None or not self.browser.is_connected():
            self.browser = self.playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        return self.browser.new_context(**options)

    def close(self) -> None:
        if self.browser is not None and self.browser.is_connected():
            self.browser.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = Chromium(playwright)
        yield chromium
        chromium.close()


def test_a_browser_that_died_is_launched_again_for_the_next_context(browser):
    browser.new_context().close()
    died = browser.browser
    died.close()  # as a crash leaves it: disconnected
    context = browser.new_context()
    assert browser.browser is not died and browser.browser.is_connected()
    context.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 390, "height": 844})  # a phone
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_test_id("logout")).to_contain_text(username)


def test_log_in_buy_and_see_the_order(page, live_server, make_user, make_voucher):
    user = make_user("alice")
    voucher = make_voucher(stock=3, title="Coffee for 1 cent")
    log_in(page, live_server, "alice")
    page.get_by_role("link", name="Coffee for 1 cent").click()
    expect(page.get_by_test_id("countdown")).to_contain_text("Live: ends in")
    page.get_by_test_id("buy").click()
    expect(page.locator("[data-outcome=bought]")).to_be_visible()
    order = Order.objects.get(user=user, voucher=voucher)
    assert stock_left(voucher) == 2
    page.get_by_role("link", name="See my orders").click()
    expect(page.get_by_test_id(f"order-{order.public_id}")).to_contain_text("Coffee for 1 cent")
    fits = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert fits, "the orders page scrolls sideways on a phone-width screen"


def stale_buy(page, live_server, voucher) -> str:
    """A click on Buy from a tab that still shows it on: the fragment the page would swap in."""
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.context.request.post(f"{live_server.url}/vouchers/{voucher.pk}/buy", headers={"X-CSRFToken": csrf})
    assert response.ok
    return response.text()


def test_sold_out_turns_buy_off_and_a_stale_click_is_refused(page, live_server, make_user, make_voucher):
    make_user("bob")
    voucher = make_voucher(stock=0, title="Gone already")
    log_in(page, live_server, "bob")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    expect(page.get_by_test_id("buy")).to_be_disabled()
    expect(page.get_by_test_id("buy-reason")).to_have_text("Sold out.")
    assert 'data-outcome="sold_out"' in stale_buy(page, live_server, voucher)
    assert not Order.objects.exists()


def test_already_bought_turns_buy_off_in_place_and_after_reload(page, live_server, make_user, make_voucher):
    user = make_user("carol")
    voucher = make_voucher(stock=5)
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    expect(page.get_by_test_id("buy")).to_be_enabled()
    # A second tab buys; this one's poll turns its button off and says why.
    assert 'data-outcome="bought"' in stale_buy(page, live_server, voucher)
    expect(page.get_by_test_id("buy")).to_be_disabled()
    expect(page.get_by_test_id("buy-reason")).to_contain_text("You bought this voucher")
    page.reload()
    expect(page.get_by_test_id("buy")).to_be_disabled()
    expect(page.get_by_test_id("buy-reason")).to_contain_text("You bought this voucher")
    # A third tab, stale, is refused in place.
    assert 'data-outcome="already_purchased"' in stale_buy(page, live_server, voucher)
    assert Order.objects.filter(user=user, voucher=voucher).count() == 1


def test_not_started_shows_a_countdown_and_turns_buy_off(page, live_server, make_user, make_voucher):
    make_user("dan")
    voucher = make_voucher(starts_in=timedelta(hours=2))
    log_in(page, live_server, "dan")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    expect(page.get_by_test_id("countdown")).to_contain_text("Starts in 01:59")
    expect(page.get_by_test_id("buy")).to_be_disabled()
    expect(page.get_by_test_id("buy-reason")).to_contain_text("The sale opens")
    assert 'data-outcome="not_started"' in stale_buy(page, live_server, voucher)
    assert not Order.objects.exists()


def test_list_page_shows_live_stock(page, live_server, make_voucher, make_user):
    voucher = make_voucher(stock=4)
    page.goto(f"{live_server.url}/")
    expect(page.get_by_test_id(f"stock-{voucher.pk}")).to_contain_text("4 / 4")
    from orders.services import order_purchase

    order_purchase(user=make_user(), voucher=voucher)
    expect(page.get_by_test_id(f"stock-{voucher.pk}")).to_contain_text("3 / 4")  # the page polls


def test_staff_restock_in_the_admin(page, live_server, make_user, make_voucher):
    admin = make_user("root", staff=True)
    admin.is_superuser = True
    admin.save()
    voucher = make_voucher(stock=1, title="Restock me")
    page.goto(f"{live_server.url}/admin/login/")
    page.locator("#id_username").fill("root")
    page.locator("#id_password").fill(PASSWORD)
    page.locator("input[type=submit]").click()
    page.goto(f"{live_server.url}/admin/orders/voucher/")
    page.get_by_role("row", name="Restock me").get_by_role("link", name="Restock", exact=True).click()
    page.get_by_label("Quantity").fill("0")
    page.get_by_role("button", name="Restock").click()
    assert page.get_by_label("Quantity").evaluate("input => !input.validity.valid")  # the browser refuses 0
    assert stock_left(voucher) == 1
    page.get_by_label("Quantity").fill("9")
    page.get_by_role("button", name="Restock").click()
    expect(page.locator(".messagelist")).to_contain_text("10 left")
    stock = Stock.objects.get(pk=stock_row(voucher))
    assert (stock.quantity, stock.initial_quantity) == (10, 10)
    expect(page.locator(".field-audit")).to_contain_text("OK")


@pytest.mark.parametrize(("path", "last_column"), [("orders/voucher", "Restock"), ("lottery/pool", None)])
def test_the_changelists_fit_a_1280_pixel_screen(browser, live_server, make_user, make_voucher, path, last_column):
    from django.core.management import call_command

    admin = make_user("root", staff=True)
    admin.is_superuser = True
    admin.save()
    call_command("seed_demo", "--quiet")  # what a new user meets, and a long title with the longest strategy name
    make_voucher(title="Two tickets to the season's closing concert, row A", strategy="db_pessimistic")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/admin/login/")
    page.locator("#id_username").fill("root")
    page.locator("#id_password").fill(PASSWORD)
    page.locator("input[type=submit]").click()
    page.goto(f"{live_server.url}/admin/{path}/")
    overflow = page.locator("#changelist .results").evaluate("el => el.scrollWidth - el.clientWidth")
    assert overflow <= 0, f"the result list scrolls sideways by {overflow}px at 1280px"
    cells = [page.locator("th.column-strategy_name")]
    if last_column:
        cells.append(page.get_by_role("link", name=last_column, exact=True).first)
    for cell in cells:
        expect(cell).to_be_visible()
        box = cell.bounding_box()
        assert box["x"] + box["width"] <= 1280
    context.close()
