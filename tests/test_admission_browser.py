"""The waiting room in Debian's Chromium, at a desktop's 1280 px and a phone's 390 px: a buyer
joins, sees their place, is let in and buys with the ticket; another sees the lobby before the
opening. Under the Content-Security-Policy, with no console error, nothing wider than the screen."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from inventory.admission.room import room_enter
from orders.product import VOUCHER
from orders.selectors import voucher_get
from tests import test_browser
from tests.test_browser import log_in
from tests.test_hold_pages_browser import assert_clean, page, within_screen  # noqa: F401 (the page fixture)
from tests.test_pages import browser_test

browser = test_browser.browser

pytestmark = [pytest.mark.usefixtures("rooms")]


@browser_test
def test_a_buyer_joins_the_queue_is_let_in_and_buys_with_the_ticket(page, live_server, make_user, make_voucher):  # noqa: F811
    make_user("queuer")
    # One admission every 10 s, and someone in just before (whom the room lets in at once,
    # nobody being ahead): the buyer waits in line some seconds, then is let in.
    voucher = make_voucher(stock=3, title="Queued coffee", admission="queue", admission_rate=0.1)
    first = make_user("first").pk
    log_in(page, live_server, "queuer")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    join = page.get_by_test_id("join")
    within_screen(page, join)
    expect(page.get_by_test_id("buy")).to_have_count(0)
    assert room_enter(VOUCHER, voucher_get(voucher_id=voucher.pk), user_id=first, join=True).status == "admitted"
    join.click()
    place = page.get_by_test_id("queue-place")
    expect(place).to_contain_text("You are number 1 in line")
    within_screen(page, place)
    expect(page.get_by_test_id("queue-admitted")).to_contain_text("It is your turn", timeout=30_000)
    buy = page.get_by_test_id("buy")
    within_screen(page, buy)
    buy.click()
    expect(page.locator('[data-outcome="bought"]')).to_be_visible()
    expect(page.get_by_test_id("buy-reason")).to_contain_text("You bought this voucher")
    assert_clean(page)


@browser_test
def test_before_the_opening_the_buyer_waits_in_the_lobby(page, live_server, make_user, make_voucher):  # noqa: F811
    make_user("early")
    voucher = make_voucher(stock=3, title="Early coffee", admission="queue", starts_in=timedelta(minutes=10))
    log_in(page, live_server, "early")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    expect(page.get_by_test_id("queue")).to_contain_text("random order")
    page.get_by_test_id("join").click()
    place = page.get_by_test_id("queue-place")
    expect(place).to_contain_text("You are in the lobby with 1 waiting")
    within_screen(page, place)
    assert_clean(page)
