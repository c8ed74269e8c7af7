"""The pages under ``redis_lua``: a purchase or a draw is answered pending (reserved in Redis,
written later by a worker), its outcome polls until it is confirmed or failed, and "My orders"
and "My draws" list it meanwhile. A sale whose Redis state is missing says it is being
restored.

Through the test client, where what the worker would do is done in-process by the same
persisting code it runs (what is tested there is the page, not the worker:
tests/test_reservations_worker.py tests that); then once in Debian's Chromium with a real
Celery worker.
"""

from __future__ import annotations

import html
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from celery import Celery
from django.conf import settings
from django.urls import reverse
from playwright.sync_api import expect

from core.namespace import instance_key
from inventory.models import StockGroup
from inventory.records import internal_of
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.drain import persist_options
from inventory.redis_lua.item_states import item_reservations_persist
from inventory.redis_lua.values import Pending
from inventory.tasks import reservations_drain
from lottery.models import Draw
from lottery.product import POOL
from orders.models import Order
from orders.product import VOUCHER
from tests import test_browser
from tests.live import database_url, instance_keys_emptied
from tests.records import answered_row
from tests.test_browser import log_in

# Chromium and a phone-sized page, registered in this module too: pytest finds fixtures by name.
browser = test_browser.browser
page = test_browser.page

pytestmark = pytest.mark.django_db(transaction=True)

# Redis on a port nothing listens on: the reservations' Redis out of reach.
UNREACHABLE = "redis://127.0.0.1:1/0"


@pytest.fixture(autouse=True)
def fresh_reservations():
    """No group's Redis state outlives its test: a test database made afresh numbers its
    stock groups from 1 again, and must not meet an earlier run's reservations."""
    client = reservations_client().client

    def clear(keep: set[int]) -> None:
        for key in client.scan_iter(match=instance_key("res:{group:*"), count=1000):
            group_id = int(re.search(rb"res:\{group:(\d+)[:}]", key).group(1))  # bucket 0, or another bucket
            if group_id not in keep:
                client.delete(key)

    clear(set(StockGroup.objects.values_list("pk", flat=True)))
    yield
    clear(set())


def outcome(content: bytes) -> tuple[str, dict[str, str]]:
    """The outcome fragment's code and its attributes."""
    text = content.decode()
    tag = re.search(r"<p [^>]*data-outcome=\"(\w+)\"[^>]*>", text)
    assert tag, f"no outcome in {text!r}"
    return tag.group(1), dict(re.findall(r'([\w-]+)="([^"]*)"', tag.group()))


def polls(attributes: dict[str, str], url: str) -> bool:
    """Whether the fragment asks ``url`` again every second and replaces itself with the answer."""
    return (
        attributes.get("hx-get") == url
        and attributes.get("hx-trigger") == "every 1s"
        and attributes.get("hx-swap") == "outerHTML"
    )


def text(content: bytes) -> str:
    """The words of a fragment, its tags left out."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", content.decode())).split())


def waiting(group_id: int) -> list[Pending]:
    """The group's reservations waiting in its stream, handed to a consumer of this test."""
    return reservations_client().pending(group_id=group_id, consumer="page-test", claim_idle_ms=0)


def persist_voucher(voucher) -> None:
    """What the drain task does for the voucher: its waiting reservations become orders."""
    item_reservations_persist(
        VOUCHER, item_id=voucher.pk, group_id=voucher.group_id, **persist_options(holding_group_lock=True)
    )


def persist_pool(pool) -> None:
    item_reservations_persist(POOL, item_id=pool.pk, group_id=pool.group_id, **persist_options(holding_group_lock=True))


def fail(group_id: int, why: str) -> None:
    """Undo every waiting reservation of the group, as the drain does with one the database refuses."""
    for one in waiting(group_id):
        assert reservations_client().release(group_id=group_id, pending=one, why=why)


def buy(client, voucher) -> tuple[int, str, dict[str, str]]:
    """Buy through the page; the order id it was answered with, the outcome and its attributes."""
    response = client.post(reverse("pages:voucher_buy", args=[voucher.pk]))
    assert response.status_code == 200
    assert response["HX-Trigger"] == "bought"
    code, attributes = outcome(response.content)
    return int(attributes.get("data-order", 0)), code, attributes


def order_status(client, order_id: int):
    return client.get(reverse("pages:order_status", args=[order_id]))


def live_reason(client, voucher) -> tuple[bool, str]:
    """Whether the Buy button is on, and the words under it."""
    live = client.get(reverse("pages:voucher_live", args=[voucher.pk])).content
    button = re.search(rb'<button[^>]*data-testid="buy"[^>]*>', live).group()
    return re.search(rb"\sdisabled(?=[\s>])", button) is None, text(live)


# --- the purchase ---------------------------------------------------------------------------------


def test_a_purchase_is_reserved_polls_and_turns_confirmed_once_persisted(client, make_user, make_voucher):
    voucher = make_voucher(stock=3, strategy="redis_lua", title="Lua latte")
    client.force_login(make_user())

    order_id, code, attributes = buy(client, voucher)
    status_url = reverse("pages:order_status", args=[order_id])
    assert code == "pending" and polls(attributes, status_url)
    assert internal_of(order_id) >= 2**62  # made of the reservation's id, as the API answers it
    assert not Order.objects.exists()  # reserved in Redis only

    # Until a worker writes it, the status answers pending and keeps polling, and raises nothing.
    response = order_status(client, order_id)
    code, attributes = outcome(response.content)
    assert code == "pending" and polls(attributes, status_url)
    assert "HX-Trigger" not in response
    assert f"Reserved! Order #{order_id} is being confirmed" in text(response.content)
    # A buyer with a pending reservation is told so, not offered Buy again.
    enabled, words = live_reason(client, voucher)
    assert not enabled and "You reserved this voucher: your order is being confirmed." in words
    mine = text(client.get(reverse("pages:order_list")).content)
    assert f"#{order_id} Lua latte pending: being confirmed" in mine

    persist_voucher(voucher)
    response = order_status(client, order_id)
    code, attributes = outcome(response.content)
    assert code == "bought" and "hx-get" not in attributes and "hx-trigger" not in attributes  # polling stops
    assert text(response.content) == f"Bought! Order #{order_id}. See my orders"  # as a purchase answered 201
    assert response["HX-Trigger"] == "bought"  # the live part reloads at once
    assert answered_row(Order, order_id).status == Order.Status.CONFIRMED
    enabled, words = live_reason(client, voucher)
    assert not enabled and "You bought this voucher." in words
    mine = client.get(reverse("pages:order_list")).content.decode()
    assert re.search(rf'data-testid="order-status-{order_id}">confirmed<', mine)


def test_a_second_click_while_pending_is_refused_as_already_bought(client, make_user, make_voucher):
    voucher = make_voucher(stock=3, strategy="redis_lua")
    client.force_login(make_user())
    order_id, code, _ = buy(client, voucher)
    assert code == "pending"
    _, code, _ = buy(client, voucher)
    assert code == "already_purchased"
    assert len(waiting(voucher.group_id)) == 1


def test_a_failed_reservation_says_why_stops_polling_and_gives_the_button_back(client, make_user, make_voucher):
    voucher = make_voucher(stock=3, strategy="redis_lua", title="Lua latte")
    client.force_login(make_user())
    order_id, code, _ = buy(client, voucher)
    assert code == "pending"

    fail(voucher.group_id, "the database refused the record: test")
    response = order_status(client, order_id)
    code, attributes = outcome(response.content)
    assert code == "failed" and "hx-get" not in attributes and "hx-trigger" not in attributes
    assert f"Order #{order_id} could not be confirmed: the database refused the record: test." in text(response.content)
    assert response["HX-Trigger"] == "bought"
    assert not Order.objects.exists()
    # The reservation was undone: its take is back, and so is the button.
    enabled, words = live_reason(client, voucher)
    assert enabled, words
    mine = text(client.get(reverse("pages:order_list")).content)
    assert f"#{order_id} Lua latte failed" in mine
    assert "the database refused the record: test" in mine


def test_my_orders_lists_confirmed_pending_and_failed_ones_newest_first(client, make_user, make_voucher):
    user = make_user()
    client.force_login(user)
    plain = make_voucher(stock=3, title="Written at once")
    failed = make_voucher(stock=3, strategy="redis_lua", title="Undone")
    pending = make_voucher(stock=3, strategy="redis_lua", title="Waiting")
    assert buy(client, plain)[1] == "bought"
    failed_id = buy(client, failed)[0]
    fail(failed.group_id, "the database was unreachable for too long")
    pending_id = buy(client, pending)[0]

    page = client.get(reverse("pages:order_list")).content.decode()
    order = Order.objects.get(voucher=plain)
    rows = re.findall(r'data-testid="order-(\d+)"', page)
    assert rows == [str(pending_id), str(failed_id), str(order.public_id)]
    statuses = dict(re.findall(r'data-testid="order-status-(\d+)">([^<]+)<', page))
    assert statuses == {
        str(pending_id): "pending: being confirmed",
        str(failed_id): "failed",
        str(order.public_id): "confirmed",
    }
    assert re.search(rf'data-testid="order-why-{failed_id}">the database was unreachable for too long<', page)


def test_the_status_of_someone_elses_order_or_when_logged_out_stops_polling(client, make_user, make_voucher):
    voucher = make_voucher(stock=3, strategy="redis_lua")
    client.force_login(make_user())
    order_id, _, _ = buy(client, voucher)

    client.force_login(make_user())
    code, attributes = outcome(order_status(client, order_id).content)
    assert code == "unknown_order" and "hx-trigger" not in attributes
    client.logout()
    code, attributes = outcome(order_status(client, order_id).content)
    assert code == "login" and "hx-trigger" not in attributes


def test_a_sale_being_restored_says_so_and_sells_nothing(client, make_user, make_voucher):
    """Redis restarted empty: the voucher's state is missing (the API answers 503)."""
    voucher = make_voucher(stock=3, strategy="redis_lua")
    client.force_login(make_user())
    reservations_client().drop(group_id=voucher.group_id)
    _, code, _ = buy(client, voucher)
    response = client.post(reverse("pages:voucher_buy", args=[voucher.pk]))
    assert code == "unavailable"
    assert "This sale is being restored: try again in a few seconds." in text(response.content)
    assert not Order.objects.exists() and not waiting(voucher.group_id)


def test_with_redis_out_of_reach_the_pages_still_answer(client, make_user, make_voucher, settings):
    voucher = make_voucher(stock=3, strategy="redis_lua")
    client.force_login(make_user())
    order_id, _, _ = buy(client, voucher)
    settings.RESERVATIONS_REDIS_URL = UNREACHABLE

    # The outcome keeps asking; my orders says what it cannot show; the page stays up.
    code, attributes = outcome(order_status(client, order_id).content)
    assert code == "pending" and polls(attributes, reverse("pages:order_status", args=[order_id]))
    page = client.get(reverse("pages:order_list"))
    assert page.status_code == 200 and b'data-testid="orders-unread"' in page.content
    assert client.get(reverse("pages:voucher_detail", args=[voucher.pk])).status_code == 200
    _, code, _ = buy(client, voucher)
    assert code == "unavailable"


# --- the draw -------------------------------------------------------------------------------------


def draw(client, pool) -> tuple[int, str, dict[str, str], str]:
    response = client.post(reverse("lottery:pool_draw", args=[pool.pk]))
    assert response.status_code == 200
    assert response["HX-Trigger"] == "drawn"
    code, attributes = outcome(response.content)
    return int(attributes.get("data-draw", 0)), code, attributes, text(response.content)


def draw_status(client, draw_id: int):
    return client.get(reverse("lottery:draw_status", args=[draw_id]))


def standing(client, pool) -> str:
    return client.get(reverse("lottery:pool_standing", args=[pool.pk])).content.decode()


def draws_left(page: str) -> int:
    return int(re.search(r'data-testid="draws-left">(\d+)<', page).group(1))


def test_a_draw_shows_its_prize_pending_then_confirmed(client, make_user, make_pool):
    pool = make_pool(prizes=(("Gold", 2),), draws_per_user=3, strategy="redis_lua")
    client.force_login(make_user())

    draw_id, code, attributes, words = draw(client, pool)
    status_url = reverse("lottery:draw_status", args=[draw_id])
    assert code == "pending" and polls(attributes, status_url)
    assert words == "You drew Gold: pending confirmation."
    assert not Draw.objects.exists()
    page = standing(client, pool)
    assert draws_left(page) == 2  # the pending draw counts
    assert re.search(rf'data-testid="draw-status-{draw_id}">pending confirmation<', page)

    response = draw_status(client, draw_id)
    code, attributes = outcome(response.content)
    assert code == "pending" and polls(attributes, status_url) and "HX-Trigger" not in response

    persist_pool(pool)
    response = draw_status(client, draw_id)
    code, attributes = outcome(response.content)
    assert code == "won" and "hx-trigger" not in attributes
    assert text(response.content) == "You won Gold!"  # as a draw answered 201
    assert response["HX-Trigger"] == "drawn"
    assert answered_row(Draw, draw_id).prize.name == "Gold"
    page = standing(client, pool)
    assert draws_left(page) == 2
    assert f'data-testid="draw-{draw_id}"' in page and f"draw-status-{draw_id}" not in page


def test_a_failed_draw_says_why_and_does_not_count(client, make_user, make_pool):
    pool = make_pool(prizes=(("Gold", 2),), draws_per_user=3, strategy="redis_lua")
    client.force_login(make_user())
    draw_id, code, _, _ = draw(client, pool)
    assert code == "pending"

    fail(pool.group_id, "the database refused the record: test")
    response = draw_status(client, draw_id)
    code, attributes = outcome(response.content)
    assert code == "failed" and "hx-trigger" not in attributes
    assert "Your draw of Gold could not be confirmed: the database refused the record: test." in text(response.content)
    assert response["HX-Trigger"] == "drawn"
    page = standing(client, pool)
    assert draws_left(page) == 3
    assert re.search(rf'data-testid="draw-status-{draw_id}">failed<', page)
    assert re.search(rf'data-testid="draw-why-{draw_id}">the database refused the record: test<', page)


def test_my_draws_lists_confirmed_pending_and_failed_ones(client, make_user, make_pool):
    pool = make_pool(prizes=(("Gold", 5),), draws_per_user=3, strategy="redis_lua")
    client.force_login(make_user())
    confirmed = draw(client, pool)[0]
    persist_pool(pool)
    failed = draw(client, pool)[0]
    fail(pool.group_id, "the database was unreachable for too long")
    pending = draw(client, pool)[0]

    page = standing(client, pool)
    assert re.findall(r'data-testid="draw-(\d+)"', page) == [str(pending), str(failed), str(confirmed)]
    assert draws_left(page) == 1  # the confirmed and the pending one
    assert re.search(rf'data-testid="draw-status-{pending}">pending confirmation<', page)
    assert re.search(rf'data-testid="draw-status-{failed}">failed<', page)
    assert f"draw-status-{confirmed}" not in page
    # The pool page itself shows the same list.
    assert (
        f'data-testid="draw-{pending}"' in client.get(reverse("lottery:pool_detail", args=[pool.pk])).content.decode()
    )


def test_a_draw_being_restored_says_so_and_counts_nothing(client, make_user, make_pool):
    pool = make_pool(prizes=(("Gold", 2),), strategy="redis_lua")
    client.force_login(make_user())
    reservations_client().drop(group_id=pool.group_id)
    _, code, _, words = draw(client, pool)
    assert code == "unavailable"
    assert "This draw is being restored: try again in a few seconds." in words
    assert not Draw.objects.exists() and not waiting(pool.group_id)


def test_the_status_of_someone_elses_draw_stops_polling(client, make_user, make_pool):
    pool = make_pool(prizes=(("Gold", 2),), strategy="redis_lua")
    client.force_login(make_user())
    draw_id = draw(client, pool)[0]
    client.force_login(make_user())
    code, attributes = outcome(draw_status(client, draw_id).content)
    assert code == "unknown_draw" and "hx-trigger" not in attributes


# --- in the browser, with a real worker -----------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
# The worker's own broker, so that no drain another test asked for (and nobody ran) reaches it.
BROKER = "redis://127.0.0.1:6379/4"


@pytest.fixture
def worker():
    """A Celery worker process on the test database and the test's Redis, on its own broker."""
    instance_keys_emptied(BROKER)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "RESERVATIONS_REDIS_URL": settings.RESERVATIONS_REDIS_URL,
        "LOCK_REDIS_URL": settings.LOCK_REDIS_URL,
        "CELERY_BROKER_URL": BROKER,
        "PYTHONPATH": str(ROOT),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "--quiet", "worker", "--concurrency", "1",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, start_new_session=True,
    )  # fmt: skip
    yield
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


@pytest.mark.browser
def test_a_purchase_in_the_browser_shows_pending_then_confirmed(page, live_server, worker, make_user, make_voucher):
    """The purchase's own ask for a drain goes to the live server's broker, which no worker
    reads: the order stays pending, in view, until the drain is sent to the worker's broker
    (as the beat's sweep would send it), and then the polling outcome turns confirmed."""
    make_user("lua-buyer")
    voucher = make_voucher(stock=3, strategy="redis_lua", title="Lua latte")
    log_in(page, live_server, "lua-buyer")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    page.get_by_test_id("buy").click()

    pending = page.locator("[data-outcome=pending]")
    expect(pending).to_contain_text("is being confirmed")
    order_id = int(pending.get_attribute("data-order"))
    expect(page.get_by_test_id("buy")).to_be_disabled()
    expect(page.get_by_test_id("buy-reason")).to_contain_text("You reserved this voucher")
    page.wait_for_timeout(2_500)  # two polls and more: still pending, nothing written
    expect(page.locator("[data-outcome=pending]")).to_be_visible()
    assert not Order.objects.exists()

    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS  # the instance's namespace, as the worker's
    with Celery(broker=BROKER, broker_transport_options=options, set_as_current=False) as sender:
        sender.send_task(reservations_drain.name, args=["voucher", voucher.pk, voucher.group_id])
    bought = page.locator("[data-outcome=bought]")
    expect(bought).to_have_text(f"Bought! Order #{order_id}. See my orders", timeout=30_000)
    expect(page.get_by_test_id("buy-reason")).to_contain_text("You bought this voucher")
    assert answered_row(Order, order_id).user.username == "lua-buyer"
    bought.get_by_role("link", name="See my orders").click()
    expect(page.get_by_test_id(f"order-status-{order_id}")).to_have_text("confirmed")


@pytest.mark.browser
def test_a_pending_draw_keeps_polling_while_the_pool_page_reloads_around_it(page, live_server, make_user, make_pool):
    """The outcome sits in the standing, which reloads every 2 s and keeps the outcome
    (``hx-preserve``): the pending draw's own polling must go on in there until it settles.
    Persisted in-process here: the worker's part is the purchase test's."""
    make_user("lua-player")
    pool = make_pool(prizes=(("Gold", 2),), draws_per_user=3, strategy="redis_lua", name="Lua dip")
    log_in(page, live_server, "lua-player")
    page.goto(f"{live_server.url}/pools/{pool.pk}/")
    page.get_by_test_id("draw").click()

    pending = page.locator("[data-outcome=pending]")
    expect(pending).to_have_text("You drew Gold: pending confirmation.")
    draw_id = int(pending.get_attribute("data-draw"))
    expect(page.get_by_test_id("draws-left")).to_have_text("2")
    expect(page.get_by_test_id(f"draw-status-{draw_id}")).to_have_text("pending confirmation")
    page.wait_for_timeout(2_500)  # the standing has reloaded around the outcome
    expect(pending).to_be_visible()

    persist_pool(pool)
    # The page's timeout (10 s), not a tighter one: the outcome polls every second and the
    # standing reloads every 2 s, timers a busy machine delays.
    expect(page.locator("[data-outcome=won]")).to_have_text("You won Gold!")
    expect(page.get_by_test_id(f"draw-{draw_id}")).to_be_visible()
    expect(page.get_by_test_id(f"draw-status-{draw_id}")).to_have_count(0)
    expect(page.get_by_test_id("draws-left")).to_have_text("2")
    assert answered_row(Draw, draw_id).prize.name == "Gold"
