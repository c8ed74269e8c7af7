"""The lifecycle in Debian's Chromium, at a desktop's 1280 px and a phone's 390 px: a held
order's countdown with Pay and Cancel, a payment on its way, a deadline that passes while the
page is open, and a won prize's Claim; under the Content-Security-Policy, with no console
error."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from lottery.models import Draw, Pool
from orders.models import Order
from payments.models import Payment
from payments.services import payment_confirm
from tests import test_browser
from tests.stock import stock_left, stock_row
from tests.test_browser import log_in
from tests.test_csp_browser import RECORD_VIOLATIONS, assert_no_violation
from tests.test_pages import browser_test, fits

browser = test_browser.browser

WIDTHS = {"desktop": 1280, "phone": 390}
# What the countdown reads once the script runs: "14:59 left", never the server's words.
TICKING = re.compile(r"^\d{1,2}:\d{2} left$")


@pytest.fixture(params=sorted(WIDTHS))
def page(request, browser):
    """A page at a desktop's or a phone's width that records every policy violation and every
    error in its console."""
    width = WIDTHS[request.param]
    context = browser.new_context(viewport={"width": width, "height": 900 if width > 400 else 844})
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.console = []
    page.errors = []
    page.on("console", lambda message: page.console.append(message.text))
    page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    context.close()


@pytest.fixture(autouse=True)
def provider(payment_provider):
    # The live server runs in this process, under the test's settings.
    return payment_provider


def windowed(item, seconds: int):
    type(item).objects.filter(pk=item.pk).update(hold_seconds=seconds)
    return item


def assert_clean(page) -> None:
    """No policy violation, no console error, and nothing wider than the screen."""
    assert_no_violation(page)
    assert not page.errors, page.errors
    assert fits(page), f"the page scrolls sideways at {page.viewport_size['width']}px"


def within_screen(page, *locators) -> None:
    width = page.viewport_size["width"]
    for locator in locators:
        expect(locator).to_be_visible()
        box = locator.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (locator, box, width)


@browser_test
def test_a_held_order_counts_down_and_cancel_puts_the_unit_back(page, live_server, make_user, make_voucher):
    make_user("hana")
    voucher = windowed(make_voucher(stock=3, title="Held coffee"), 900)
    log_in(page, live_server, "hana")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    expect(page.get_by_test_id("hold-window")).to_have_text("Pay within 15 minutes of buying, or the order expires.")
    page.get_by_test_id("buy").click()

    held = page.locator("#outcome [data-outcome=held]")
    expect(held).to_contain_text("is held for you: pay by")
    left = held.get_by_test_id("time-left")
    expect(left).to_have_text(TICKING)
    first = left.inner_text()
    expect(left).not_to_have_text(first, timeout=3_000)  # it ticks
    assert int(first.split(":")[0]) in (14, 15)
    pay, cancel = held.get_by_role("button", name="Pay"), held.get_by_role("button", name="Cancel order")
    within_screen(page, pay, cancel, left)
    expect(page.get_by_test_id("stock")).to_have_text("2")
    expect(page.get_by_test_id("buy")).to_be_disabled()
    expect(page.get_by_test_id("buy-reason")).to_be_hidden()  # the held outcome says it

    cancel.click()
    cancelled = page.locator("#outcome [data-outcome=cancelled]")
    expect(cancelled).to_contain_text("is cancelled: its unit went back on sale.")
    expect(page.get_by_test_id("stock")).to_have_text("3", timeout=1_500)  # the answer reloads the live part
    expect(page.get_by_test_id("buy")).to_be_enabled()
    order = Order.objects.get(voucher=voucher)
    assert order.status == Order.Status.CANCELLED
    assert stock_left(voucher) == 3
    assert_clean(page)


@browser_test
def test_a_held_order_keeps_pay_and_cancel_after_a_reload(page, live_server, make_user, make_voucher):
    make_user("ines")
    voucher = windowed(make_voucher(stock=3, title="Held tea"), 900)
    log_in(page, live_server, "ines")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    page.get_by_test_id("buy").click()
    expect(page.locator("#outcome [data-outcome=held]")).to_contain_text("is held for you: pay by")

    page.reload()
    held = page.locator("#outcome [data-outcome=held]")
    expect(held).to_contain_text("is held for you: pay by")
    expect(held.get_by_test_id("time-left")).to_have_text(TICKING)
    pay, cancel = held.get_by_role("button", name="Pay"), held.get_by_role("button", name="Cancel order")
    within_screen(page, pay, cancel)
    expect(page.get_by_test_id("buy-reason")).to_be_hidden()  # the held order says it
    page.wait_for_timeout(2_500)  # the live part has reloaded beside it: still there
    expect(pay).to_be_visible()
    pay.click()
    expect(page.locator("#outcome [data-outcome=paid]")).to_contain_text("Paid!")
    assert Order.objects.get(voucher=voucher).status == Order.Status.PAID
    page.reload()  # paid: nothing left to do, the page says it once in its live part
    expect(page.locator("#outcome [data-outcome]")).to_have_count(0)
    assert_clean(page)


@browser_test
def test_pay_from_my_orders(page, live_server, make_user, make_voucher):
    user = make_user("ivan")
    voucher = windowed(make_voucher(stock=3, title="Paid tea"), 600)
    log_in(page, live_server, "ivan")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    page.get_by_test_id("buy").click()
    expect(page.locator("#outcome [data-outcome=held]")).to_be_visible()
    order = Order.objects.get(user=user)
    page.goto(f"{live_server.url}/orders/")
    row = page.get_by_test_id(f"order-{order.public_id}")
    expect(row.get_by_test_id("time-left")).to_have_text(TICKING)
    within_screen(page, row.get_by_role("button", name="Pay"), row.get_by_role("button", name="Cancel order"))
    assert_clean(page)

    row.get_by_role("button", name="Pay").click()
    expect(row.locator("[data-outcome=paid]")).to_contain_text(f"Paid! Order #{order.public_id} is yours.")
    expect(row.get_by_role("link", name="See my orders")).to_be_hidden()  # it is this page
    expect(row.get_by_role("button", name="Pay")).to_have_count(0)
    assert Order.objects.get(pk=order.pk).status == Order.Status.PAID
    assert Payment.objects.get(order=order).status == Payment.Status.PAID
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    expect(page.get_by_test_id("buy-reason")).to_contain_text("You bought this voucher")
    assert_clean(page)


@browser_test
def test_a_payment_on_its_way_shows_pending_until_it_is_paid(page, live_server, make_user, make_voucher, provider):
    provider.PAYMENT_PROVIDER_DELAY_MS = 60_000  # the callback is this test's to send
    user = make_user("jo")
    voucher = windowed(make_voucher(stock=3), 600)
    log_in(page, live_server, "jo")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    page.get_by_test_id("buy").click()
    page.locator("#outcome").get_by_role("button", name="Pay").click()
    pending = page.locator("#outcome [data-outcome=payment_pending]")
    expect(pending).to_contain_text("payment pending")
    page.wait_for_timeout(1_500)  # polled, and still pending
    expect(pending).to_be_visible()
    payment_confirm(reference=Payment.objects.get(order__user=user).reference)
    expect(page.locator("#outcome [data-outcome=paid]")).to_be_visible(timeout=3_000)
    assert_clean(page)


@browser_test
def test_a_deadline_that_passes_while_the_page_is_open_shows_the_order_expired(
    page, live_server, make_user, make_voucher
):
    make_user("kim")
    voucher = windowed(make_voucher(stock=1), 2)
    log_in(page, live_server, "kim")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    page.get_by_test_id("buy").click()
    expect(page.locator("#outcome [data-outcome=held]")).to_be_visible()
    # At zero the fragment asks what became of the order: past its deadline, it is expired.
    expired = page.locator("#outcome [data-outcome=expired]")
    expect(expired).to_contain_text("expired unpaid", timeout=5_000)
    expect(expired.get_by_role("button")).to_have_count(0)
    assert_clean(page)


@browser_test
def test_a_prize_won_with_a_claim_window_is_claimed(page, live_server, make_user, make_pool):
    user = make_user("lea")
    pool = windowed(make_pool(prizes=(("Gold", 2),), draws_per_user=2, name="Claim me"), 600)
    log_in(page, live_server, "lea")
    page.goto(f"{live_server.url}/pools/{pool.pk}/")
    expect(page.get_by_test_id("hold-window")).to_contain_text("Claim a prize within 10 minutes of winning it")
    page.get_by_test_id("draw").click()
    held = page.locator("#outcome [data-outcome=held]")
    expect(held).to_contain_text("You won Gold! Claim it by")
    expect(held.get_by_test_id("time-left")).to_have_text(TICKING)
    draw = Draw.objects.get(user=user)
    listed = page.get_by_test_id(f"draw-{draw.public_id}")
    expect(listed).to_be_attached()
    # Said once: its line in my draws, below, would repeat "You won Gold! ... Claim".
    expect(page.locator("[data-outcome=held]:visible")).to_have_count(1)
    expect(page.get_by_role("button", name="Claim")).to_have_count(1)
    within_screen(page, held.get_by_role("button", name="Claim"))
    page.wait_for_timeout(2_500)  # the standing has reloaded around the outcome: still there, still once
    expect(held).to_be_visible()
    expect(page.locator("[data-outcome=held]:visible")).to_have_count(1)

    held.get_by_role("button", name="Claim").click()
    expect(page.locator("#outcome [data-outcome=claimed]")).to_have_text("Gold is yours: claimed.")
    expect(listed.locator("[data-outcome=claimed]")).to_be_visible(timeout=3_000)
    assert Draw.objects.get(pk=draw.pk).status == Draw.Status.CLAIMED
    assert_clean(page)


@browser_test
def test_claim_from_the_list_in_the_standing(page, live_server, make_user, make_pool):
    user = make_user("max")
    pool = windowed(make_pool(prizes=(("Kite", 3),), draws_per_user=2), 600)
    from lottery.services import pool_draw

    draw = pool_draw(user=user, pool=Pool.objects.get(pk=pool.pk))
    log_in(page, live_server, "max")
    page.goto(f"{live_server.url}/pools/{pool.pk}/")
    listed = page.get_by_test_id(f"draw-{draw.public_id}")
    expect(listed.get_by_test_id("time-left")).to_have_text(TICKING)
    page.wait_for_timeout(2_200)  # a poll of the standing has replaced the list once
    listed.get_by_role("button", name="Claim").click()
    expect(listed.locator("[data-outcome=claimed]")).to_have_text("Kite is yours: claimed.")
    assert Draw.objects.get(pk=draw.pk).status == Draw.Status.CLAIMED
    page.goto(f"{live_server.url}/draws/")
    expect(page.get_by_test_id(f"draw-{draw.public_id}").locator("[data-outcome=claimed]")).to_be_visible()
    assert_clean(page)


@browser_test
def test_my_orders_go_a_page_at_a_time_by_their_links(page, live_server, make_user, make_voucher):
    from inventory.paging import PAGE_SIZE

    user = make_user("pia")
    voucher = make_voucher(stock=100, title="Paged coffee")
    # Bought by a naive strategy (no one-per-user key): many orders of one voucher.
    row = stock_row(voucher)
    orders = Order.objects.bulk_create(Order(user=user, voucher=voucher, stock_id=row) for _ in range(PAGE_SIZE + 3))
    log_in(page, live_server, "pia")
    page.goto(f"{live_server.url}/orders/")
    pages = page.get_by_role("navigation", name="Pages of my orders")
    expect(page.locator("[data-testid^=order-status-]")).to_have_count(PAGE_SIZE)
    expect(pages.get_by_role("link")).to_have_text(["Older orders"])
    assert_clean(page)
    pages.get_by_role("link", name="Older orders").click()
    expect(page.locator("[data-testid^=order-status-]")).to_have_count(3)
    expect(page.get_by_test_id(f"order-{min(orders, key=lambda order: order.pk).public_id}")).to_be_visible()
    expect(pages.get_by_role("link")).to_have_text(["Newest orders"])
    assert_clean(page)
    pages.get_by_role("link", name="Newest orders").click()
    expect(page.get_by_test_id(f"order-{max(orders, key=lambda order: order.pk).public_id}")).to_be_visible()
