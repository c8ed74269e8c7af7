"""What the voucher and pool pages are for: each shows its strategy (and whether it is
expected to break), an audit that found it oversold or over-awarded, Buy and Draw
buttons that say why they are off, and stock that moves while you watch.

Through the test client, then in Debian's Chromium at phone width.
"""

from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape
from playwright.sync_api import expect

from accounts.services import token_issue
from inventory.models import Stock
from inventory.strategies import STRATEGIES
from inventory.strategies.base import StockStrategy
from inventory.texts import TEXTS, StrategyTexts
from inventory.totals import totals_recount
from lottery.models import Draw, Pool
from lottery.product import POOL
from lottery.selectors import pool_audit, pool_list_marked
from orders.models import Order, Voucher
from orders.product import VOUCHER
from orders.selectors import voucher_audit, voucher_list_marked
from tests import test_browser
from tests.buyers import buy_concurrently
from tests.conftest import STAFF_PERMISSIONS
from tests.stock import stock_row
from tests.test_browser import log_in

# Chromium and a phone-sized page (390 x 844), registered here too: pytest finds fixtures by name.
browser = test_browser.browser
page = test_browser.page

HOUR = timedelta(hours=1)


def button_state(html: str, testid: str) -> tuple[bool, str | None]:
    """``(enabled, reason)`` of the button ``testid`` and the reason code shown under it."""
    tag = re.search(rf'<button[^>]*data-testid="{testid}"[^>]*>', html)
    assert tag, f"no {testid} button in the page"
    disabled = re.search(r"\sdisabled(?=[\s>])", tag.group()) is not None
    reason = re.search(rf'data-testid="{testid}-reason" data-reason="(\w+)"', html)
    return not disabled, reason.group(1) if reason else None


def buy_state(client: Client, voucher: Voucher) -> tuple[bool, str | None]:
    """The Buy button's state, the same on the voucher page and in its polled live part."""
    page_html = client.get(reverse("pages:voucher_detail", args=[voucher.pk])).content.decode()
    live_html = client.get(reverse("pages:voucher_live", args=[voucher.pk])).content.decode()
    state = button_state(page_html, "buy")
    assert button_state(live_html, "buy") == state
    return state


def draw_state(client: Client, pool: Pool) -> tuple[bool, str | None]:
    """The Draw button's state, the same on the pool page and in its polled standing."""
    page_html = client.get(reverse("lottery:pool_detail", args=[pool.pk])).content.decode()
    standing_html = client.get(reverse("lottery:pool_standing", args=[pool.pk])).content.decode()
    state = button_state(page_html, "draw")
    assert button_state(standing_html, "draw") == state
    return state


# --- the Buy button -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_buy_is_on_while_the_sale_is_live_with_stock(client, make_user, make_voucher):
    voucher = make_voucher(stock=2)
    assert buy_state(client, voucher) == (True, None)  # anonymous: a click asks to log in
    client.force_login(make_user())
    assert buy_state(client, voucher) == (True, None)
    live = client.get(reverse("pages:voucher_live", args=[voucher.pk])).content.decode()
    assert f'hx-post="{reverse("pages:voucher_buy", args=[voucher.pk])}"' in live


@pytest.mark.django_db
def test_buy_is_off_before_the_window_opens(client, make_user, make_voucher):
    client.force_login(make_user())
    voucher = make_voucher(starts_in=2 * HOUR)
    assert buy_state(client, voucher) == (False, "not_started")
    assert "The sale opens" in client.get(reverse("pages:voucher_live", args=[voucher.pk])).content.decode()


@pytest.mark.django_db
def test_buy_is_off_once_sold_out(client, make_user, make_voucher):
    client.force_login(make_user())
    voucher = make_voucher(stock=1)
    assert buy_state(client, voucher) == (True, None)
    other = Client()
    other.force_login(make_user())
    other.post(reverse("pages:voucher_buy", args=[voucher.pk]))  # the last unit, to someone else
    assert buy_state(client, voucher) == (False, "sold_out")
    assert "Sold out." in client.get(reverse("pages:voucher_live", args=[voucher.pk])).content.decode()


@pytest.mark.django_db
def test_buy_is_off_after_the_users_purchase_and_the_answer_reloads_the_live_part(client, make_user, make_voucher):
    client.force_login(make_user())
    voucher = make_voucher(stock=5)
    response = client.post(reverse("pages:voucher_buy", args=[voucher.pk]))
    assert b'data-outcome="bought"' in response.content
    assert response["HX-Trigger"] == "bought"
    assert buy_state(client, voucher) == (False, "already_purchased")
    live = client.get(reverse("pages:voucher_live", args=[voucher.pk])).content.decode()
    assert 'data-testid="stock">4<' in live
    assert "You bought this voucher" in live


@pytest.mark.django_db
def test_buy_is_off_after_the_window_ends(client, make_user, make_voucher):
    client.force_login(make_user())
    voucher = make_voucher(starts_in=-2 * HOUR, lasts=HOUR)
    assert buy_state(client, voucher) == (False, "ended")


@pytest.mark.django_db
def test_the_users_own_purchase_is_the_reason_that_outlasts_the_sale(client, make_user, make_voucher):
    user = make_user()
    client.force_login(user)
    voucher = make_voucher(stock=1)
    client.post(reverse("pages:voucher_buy", args=[voucher.pk]))
    Voucher.objects.filter(pk=voucher.pk).update(end_at=voucher.begin_at + timedelta(seconds=1))
    assert buy_state(client, voucher) == (False, "already_purchased")  # not "sold out", not "ended"


@pytest.mark.django_db
def test_the_voucher_page_polls_its_live_part_and_reloads_it_after_a_purchase(client, make_voucher):
    voucher = make_voucher()
    html = client.get(reverse("pages:voucher_detail", args=[voucher.pk])).content.decode()
    assert f'hx-get="{reverse("pages:voucher_live", args=[voucher.pk])}"' in html
    assert 'hx-trigger="bought from:body, every 2s"' in html


# --- the Draw button ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_draw_is_on_while_the_pool_is_live_with_prizes(client, make_user, make_pool):
    pool = make_pool()
    assert draw_state(client, pool) == (True, None)
    client.force_login(make_user())
    assert draw_state(client, pool) == (True, None)


@pytest.mark.django_db
def test_draw_is_off_before_the_window_opens(client, make_user, make_pool):
    client.force_login(make_user())
    pool = make_pool(starts_in=2 * HOUR)
    assert draw_state(client, pool) == (False, "not_started")


@pytest.mark.django_db
def test_draw_is_off_once_every_prize_is_won(client, make_user, make_pool):
    client.force_login(make_user())
    pool = make_pool(prizes=(("Gold", 1),), draws_per_user=3)
    client.post(reverse("lottery:pool_draw", args=[pool.pk]))  # wins the one prize
    assert draw_state(client, pool) == (False, "pool_empty")
    standing = client.get(reverse("lottery:pool_standing", args=[pool.pk])).content.decode()
    assert "Every prize has been won." in standing


@pytest.mark.django_db
def test_draw_is_off_after_the_users_last_draw(client, make_user, make_pool):
    client.force_login(make_user())
    pool = make_pool(draws_per_user=2)
    client.post(reverse("lottery:pool_draw", args=[pool.pk]))
    assert draw_state(client, pool) == (True, None)
    client.post(reverse("lottery:pool_draw", args=[pool.pk]))
    assert draw_state(client, pool) == (False, "draw_limit")


@pytest.mark.django_db
def test_draw_is_off_after_the_window_ends(client, make_user, make_pool):
    client.force_login(make_user())
    pool = make_pool(starts_in=-2 * HOUR, lasts=HOUR)
    assert draw_state(client, pool) == (False, "ended")


# --- the strategy: shown from the registry, switched by staff ----------------------------------


@dataclass
class Product:
    """A voucher or a pool, seen the same way by the strategy tests."""

    item: Voucher | Pool
    detail: str
    switch: str
    list_rows: str
    permission: str  # what switching its strategy needs, as changing it in the admin does

    def strategy(self) -> str:
        return type(self.item).objects.get(pk=self.item.pk).strategy


@pytest.fixture(params=["voucher", "pool"])
def product(request, make_voucher, make_pool) -> Product:
    if request.param == "voucher":
        voucher = make_voucher(strategy="db_atomic")
        return Product(
            voucher,
            reverse("pages:voucher_detail", args=[voucher.pk]),
            reverse("pages:voucher_strategy", args=[voucher.pk]),
            reverse("pages:voucher_stock"),
            "orders.change_voucher",
        )
    pool = make_pool(strategy="db_atomic")
    return Product(
        pool,
        reverse("lottery:pool_detail", args=[pool.pk]),
        reverse("lottery:pool_strategy", args=[pool.pk]),
        reverse("lottery:pool_rows"),
        "lottery.change_pool",
    )


@pytest.mark.django_db
def test_the_list_and_the_page_explain_the_strategy_and_mark_the_unsafe_ones(client, product):
    for name, strategy in STRATEGIES.items():
        type(product.item).objects.filter(pk=product.item.pk).update(strategy=name)
        for url in (product.detail, product.list_rows):
            html = client.get(url).content.decode()
            assert f'data-strategy="{name}"' in html
            assert escape(TEXTS[name].explanation) in html
            assert ('data-testid="strategy-unsafe"' in html) == (strategy.breaks is not None), (name, url)
            if strategy.breaks == "across_processes":
                assert ">unsafe across processes<" in html


@pytest.mark.django_db
def test_a_strategy_added_to_the_registry_shows_with_no_template_change(client, make_user, product, monkeypatch):
    class CarrierPigeon(StockStrategy):
        name = "carrier_pigeon"
        breaks = "in_bad_weather"

    monkeypatch.setitem(STRATEGIES, CarrierPigeon.name, CarrierPigeon())
    monkeypatch.setitem(TEXTS, CarrierPigeon.name, StrategyTexts("a bird carries the stock count between servers", ""))
    type(product.item).objects.filter(pk=product.item.pk).update(strategy="carrier_pigeon")
    client.force_login(make_user(staff=True))
    for url in (product.detail, product.list_rows):
        html = client.get(url).content.decode()
        assert 'data-strategy="carrier_pigeon"' in html
        assert "a bird carries the stock count between servers" in html
        assert re.search(r'data-testid="strategy-unsafe"[^>]*>unsafe<', html)  # a new way to break: "unsafe"
    form = client.get(product.detail).content.decode()
    assert '<option value="carrier_pigeon" selected>' in form


@pytest.mark.django_db
def test_staff_switch_the_strategy_from_the_page(client, make_user, product):
    client.force_login(make_user(staff=True))
    page_html = client.get(product.detail).content.decode()
    assert f'action="{product.switch}"' in page_html
    for name in STRATEGIES:  # every strategy of the registry is offered
        assert f'<option value="{name}"' in page_html
    response = client.post(product.switch, {"strategy": "redis_lock"})
    assert response.status_code == 302
    assert response["Location"] == product.detail
    assert product.strategy() == "redis_lock"
    assert 'data-strategy="redis_lock"' in client.get(product.detail).content.decode()


@pytest.mark.django_db
def test_an_unknown_strategy_is_refused_and_changes_nothing(client, make_user, product):
    client.force_login(make_user(staff=True))
    assert client.post(product.switch, {"strategy": "hope"}).status_code == 400
    assert client.post(product.switch, {}).status_code == 400
    assert client.get(product.switch).status_code == 405
    assert product.strategy() == "db_atomic"


@pytest.mark.django_db
def test_non_staff_cannot_switch_the_strategy_nor_see_the_form(client, make_user, product):
    response = client.post(product.switch, {"strategy": "none"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    client.force_login(make_user())
    assert client.post(product.switch, {"strategy": "none"}).status_code == 403
    assert 'data-testid="strategy-switch"' not in client.get(product.detail).content.decode()
    assert product.strategy() == "db_atomic"


@pytest.mark.django_db
def test_staff_without_the_change_permission_cannot_switch_the_strategy_nor_see_the_form(client, make_user, product):
    # Every other staff permission, and still refused: the admin would not let them change it either.
    others = tuple(p for p in STAFF_PERMISSIONS if p != product.permission)
    for held in (others, ()):
        client.force_login(make_user(staff=True, permissions=held))
        assert client.post(product.switch, {"strategy": "none"}).status_code == 403
        assert 'data-testid="strategy-switch"' not in client.get(product.detail).content.decode()
    assert product.strategy() == "db_atomic"


@pytest.mark.django_db
def test_staff_with_the_change_permission_or_a_superuser_switch_the_strategy(client, make_user, product):
    client.force_login(make_user(staff=True, permissions=(product.permission,)))
    assert 'data-testid="strategy-switch"' in client.get(product.detail).content.decode()
    assert client.post(product.switch, {"strategy": "none"}).status_code == 302
    assert product.strategy() == "none"
    boss = make_user(staff=True, permissions=())
    boss.is_superuser = True
    boss.save(update_fields=["is_superuser"])
    client.force_login(boss)
    assert client.post(product.switch, {"strategy": "redis_lock"}).status_code == 302
    assert product.strategy() == "redis_lock"


@pytest.mark.django_db
def test_the_strategy_switch_needs_the_csrf_token(make_user, product):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(staff=True))
    assert client.post(product.switch, {"strategy": "none"}).status_code == 403
    assert product.strategy() == "db_atomic"
    html = client.get(product.detail).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    assert client.post(product.switch, {"strategy": "none", "csrfmiddlewaretoken": token}).status_code == 302
    assert product.strategy() == "none"


# --- the running totals' marks --------------------------------------------------------------------


def leave_what_a_naive_strategy_leaves(voucher: Voucher, buyers: list, *, stock_left: int) -> None:
    """Orders as ``none`` writes them under a crowd (no backstop key, so beyond the stock and
    repeated), the stock its lost updates leave behind, and the running totals its writes
    keep (counted here from the orders): what the pages must expose."""
    row = stock_row(voucher)
    Order.objects.bulk_create(Order(user=user, voucher=voucher, stock_id=row, buyer_guard=None) for user in buyers)
    Stock.objects.filter(pk=stock_row(voucher)).update(quantity=stock_left)
    totals_recount(VOUCHER, item_ids=[voucher.pk])


def leave_what_naive_draws_leave(pool, draws: list[tuple]) -> None:
    """Draws of ``(user, prize)`` as ``none`` writes them, beyond the stock and the limit, the
    won prizes' stock read at zero, and the running totals its writes keep."""
    Draw.objects.bulk_create(
        Draw(user=user, pool=pool, prize=prize, stock_id=prize.stock_id, seq=1, user_guard=None)
        for user, prize in draws
    )
    Stock.objects.filter(pk__in=[prize.stock_id for _, prize in draws]).update(quantity=0)
    totals_recount(POOL, item_ids=[pool.pk])


@pytest.mark.django_db
def test_an_oversold_voucher_is_marked_in_the_list_and_on_its_page(client, make_user, make_voucher):
    clean = make_voucher(stock=2, title="Held")
    oversold = make_voucher(stock=2, strategy="none", title="Oversold")
    ann, bob, cid = make_user(), make_user(), make_user()
    # Four buyers read 2 left and all wrote 1; Ann's two orders raced each other.
    leave_what_a_naive_strategy_leaves(oversold, [ann, bob, cid, ann], stock_left=1)
    audit = voucher_audit(voucher_id=oversold.pk)
    assert (audit.oversold, audit.duplicates, audit.conserved) == (2, 1, False)

    rows = client.get(reverse("pages:voucher_stock")).content.decode()
    flags = re.search(rf'data-testid="flags-{oversold.pk}">(.*?)</div>', rows, re.S).group(1)
    assert "oversold: 2 sold beyond stock" in flags
    assert "1 duplicate order" in flags
    assert f'data-testid="flags-{clean.pk}"' not in rows

    for url in (reverse("pages:voucher_detail", args=[oversold.pk]), reverse("pages:voucher_live", args=[oversold.pk])):
        html = client.get(url).content.decode()
        assert "oversold: 2 sold beyond stock" in html
        assert "1 duplicate order" in html
    assert 'data-testid="flags"' not in client.get(reverse("pages:voucher_detail", args=[clean.pk])).content.decode()


@pytest.mark.django_db
def test_lost_updates_are_marked_before_they_oversell(client, make_user, make_voucher):
    voucher = make_voucher(stock=5, strategy="none")
    leave_what_a_naive_strategy_leaves(voucher, [make_user(), make_user()], stock_left=4)  # two sold, one counted
    rows = client.get(reverse("pages:voucher_stock")).content.decode()
    assert "stock miscounted" in rows
    assert "oversold" not in rows
    assert "stock miscounted" in client.get(reverse("pages:voucher_live", args=[voucher.pk])).content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_voucher_oversold_by_real_concurrent_buyers_is_marked(client, make_user, make_voucher):
    voucher = make_voucher(stock=2, strategy="none")
    users = [make_user() for _ in range(12)]
    plan = [[user.pk for user in users[i::4]] for i in range(4)]  # 4 processes x 3 threads
    outcome = buy_concurrently(voucher_id=voucher.pk, plan=plan, race_ms=30)
    assert not outcome.unexpected
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.oversold > 0, "none sold no more than its stock: the race did not happen"
    rows = client.get(reverse("pages:voucher_stock")).content.decode()
    assert f"oversold: {audit.oversold} sold beyond stock" in rows
    live = client.get(reverse("pages:voucher_live", args=[voucher.pk])).content.decode()
    assert f"oversold: {audit.oversold} sold beyond stock" in live


@pytest.mark.django_db
def test_an_over_awarded_pool_is_marked_in_the_list_and_on_its_page(client, make_user, make_pool):
    clean = make_pool(name="Held")
    pool = make_pool(name="Over-awarded", prizes=(("Gold", 1), ("Silver", 5)), draws_per_user=1, strategy="none")
    gold = pool.prizes.get(name="Gold")
    ann, bob = make_user(), make_user()
    # Three draws read one Gold left and all won it; Ann drew twice against a limit of one.
    leave_what_naive_draws_leave(pool, [(ann, gold), (ann, gold), (bob, gold)])
    audit = pool_audit(pool_id=pool.pk)
    assert (audit.over_awarded, audit.users_over_limit, audit.draws_over_limit) == (2, 1, 1)

    rows = client.get(reverse("lottery:pool_rows")).content.decode()
    flags = re.search(rf'data-testid="flags-{pool.pk}">(.*?)</div>', rows, re.S).group(1)
    assert "over-awarded: 2 prizes beyond stock" in flags
    assert "1 user over the draw limit (1 extra draw)" in flags
    assert f'data-testid="flags-{clean.pk}"' not in rows

    for url in (reverse("lottery:pool_detail", args=[pool.pk]), reverse("lottery:pool_odds", args=[pool.pk])):
        html = client.get(url).content.decode()
        assert "over-awarded: 2 prizes beyond stock" in html
        assert f'data-testid="prize-over-awarded-{gold.pk}">over-awarded: 2 beyond stock<' in html
    assert 'data-testid="flags"' not in client.get(reverse("lottery:pool_odds", args=[clean.pk])).content.decode()


@pytest.mark.django_db
def test_the_lists_marks_say_what_the_audit_says(make_user, make_voucher, make_pool):
    users = [make_user() for _ in range(3)]
    make_voucher(stock=3)
    leave_what_a_naive_strategy_leaves(make_voucher(stock=1, strategy="none"), users + users[:1], stock_left=0)
    leave_what_a_naive_strategy_leaves(make_voucher(stock=5, strategy="local"), users[:2], stock_left=4)
    for voucher in voucher_list_marked():
        audit, marks = voucher_audit(voucher_id=voucher.pk), voucher.marks
        assert audit.totals_agree
        assert (marks.over, marks.over_takes, marks.conserved) == (audit.oversold, audit.duplicates, audit.conserved)
    make_pool(prizes=())
    pool = make_pool(prizes=(("Gold", 1),), draws_per_user=1, strategy="none")
    leave_what_naive_draws_leave(pool, [(user, pool.prizes.get()) for user in users + users])
    for pool in pool_list_marked():
        audit, marks = pool_audit(pool_id=pool.pk), pool.marks
        assert audit.totals_agree
        assert (marks.over, marks.over_takers, marks.over_takes, marks.conserved) == (
            audit.over_awarded,
            audit.users_over_limit,
            audit.draws_over_limit,
            audit.conserved,
        )


def count_queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.django_db
def test_the_voucher_list_marks_every_row_in_one_query(client, make_user, make_voucher, django_assert_max_num_queries):
    users = [make_user() for _ in range(3)]
    leave_what_a_naive_strategy_leaves(make_voucher(stock=1, strategy="none"), users, stock_left=0)
    one = count_queries(client, reverse("pages:voucher_stock"))
    for _ in range(10):
        leave_what_a_naive_strategy_leaves(make_voucher(stock=1, strategy="none"), users + users, stock_left=0)
    with django_assert_max_num_queries(1):
        rows = client.get(reverse("pages:voucher_stock")).content.decode()
    assert rows.count("oversold: ") == 11
    assert one == 1
    with django_assert_max_num_queries(1):
        client.get(reverse("pages:voucher_list"))


@pytest.mark.django_db
def test_the_pool_list_marks_every_row_in_two_queries(client, make_user, make_pool, django_assert_max_num_queries):
    users = [make_user() for _ in range(3)]
    for _ in range(8):
        pool = make_pool(prizes=(("Gold", 1), ("Silver", 2)), draws_per_user=1, strategy="none")
        gold = pool.prizes.get(name="Gold")
        leave_what_naive_draws_leave(pool, [(user, gold) for user in users])
    # The pools with their groups, then their prizes' stock rows, for all of them at once.
    with django_assert_max_num_queries(2):
        rows = client.get(reverse("lottery:pool_rows")).content.decode()
    assert rows.count("over-awarded: 2 prizes beyond stock") == 8
    with django_assert_max_num_queries(2):
        client.get(reverse("lottery:pool_list"))


# --- in Chromium at phone width -------------------------------------------------------------------


def browser_test(test):
    """Drives Chromium against the live server, which sees only committed rows."""
    return pytest.mark.browser(pytest.mark.django_db(transaction=True)(test))


def fits(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def api_purchase(live_server, user, voucher: Voucher) -> int:
    """A purchase by ``user`` through the JSON API, as another browser or a script would make it."""
    request = urllib.request.Request(
        f"{live_server.url}/api/vouchers/{voucher.pk}/purchase",
        method="POST",
        headers={"Authorization": f"Bearer {token_issue(user=user)}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


@browser_test
def test_the_lists_tell_upcoming_from_live_in_words_on_a_phone(page, live_server, make_user, make_voucher, make_pool):
    live = make_voucher(title="On sale now", strategy="none")
    upcoming = make_voucher(title="On sale tomorrow", starts_in=24 * HOUR, strategy="db_pessimistic")
    ended = make_voucher(title="Over already", starts_in=-3 * HOUR, lasts=HOUR)
    leave_what_a_naive_strategy_leaves(live, [make_user(), make_user(), make_user()], stock_left=4)
    page.goto(f"{live_server.url}/")
    for voucher, state in ((live, "live"), (upcoming, "upcoming"), (ended, "ended")):
        expect(page.get_by_test_id(f"state-{voucher.pk}")).to_be_visible()
        expect(page.get_by_test_id(f"state-{voucher.pk}")).to_have_text(state)
    row = page.get_by_test_id(f"voucher-row-{live.pk}")
    expect(row.get_by_test_id("strategy-unsafe")).to_have_text("unsafe")
    expect(row.get_by_test_id("strategy-explanation")).to_be_visible()
    expect(page.get_by_test_id(f"flags-{live.pk}")).to_contain_text("stock miscounted")
    assert fits(page), "the sales list scrolls sideways on a phone"

    live_pool = make_pool(name="Drawing now", strategy="local")
    upcoming_pool = make_pool(name="Drawing next week", starts_in=7 * 24 * HOUR, strategy="db_optimistic")
    page.goto(f"{live_server.url}/pools/")
    expect(page.get_by_test_id(f"state-{live_pool.pk}")).to_have_text("live")
    expect(page.get_by_test_id(f"state-{upcoming_pool.pk}")).to_have_text("upcoming")
    expect(page.get_by_test_id(f"pool-row-{live_pool.pk}").get_by_test_id("strategy-unsafe")).to_have_text(
        "unsafe across processes"
    )
    assert fits(page), "the pool list scrolls sideways on a phone"


@browser_test
def test_the_voucher_page_follows_purchases_made_elsewhere(page, live_server, make_user, make_voucher):
    make_user("erin")
    voucher = make_voucher(stock=2, title="Two left")
    log_in(page, live_server, "erin")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    expect(page.get_by_test_id("stock")).to_have_text("2")
    expect(page.get_by_test_id("buy")).to_be_enabled()

    assert api_purchase(live_server, make_user(), voucher) == 201
    expect(page.get_by_test_id("stock")).to_have_text("1")  # the page polls; nobody reloaded it
    expect(page.get_by_test_id("buy")).to_be_enabled()

    assert api_purchase(live_server, make_user(), voucher) == 201
    expect(page.get_by_test_id("stock")).to_have_text("0")
    expect(page.get_by_test_id("buy")).to_be_disabled()
    expect(page.get_by_test_id("buy-reason")).to_have_text("Sold out.")
    assert fits(page), "the voucher page scrolls sideways on a phone"


@browser_test
def test_buy_in_place_then_the_button_says_why_it_is_off(page, live_server, make_user, make_voucher):
    user = make_user("fred")
    voucher = make_voucher(stock=3)
    log_in(page, live_server, "fred")
    page.goto(f"{live_server.url}/vouchers/{voucher.pk}/")
    page.get_by_test_id("buy").click()
    expect(page.locator("[data-outcome=bought]")).to_be_visible()
    # The answer reloads the live part at once: no wait for the next poll.
    expect(page.get_by_test_id("stock")).to_have_text("2", timeout=1_500)
    expect(page.get_by_test_id("buy")).to_be_disabled()
    expect(page.get_by_test_id("buy-reason")).to_contain_text("You bought this voucher")
    expect(page.locator("[data-outcome=bought]")).to_be_visible()  # the outcome stays in view
    assert Order.objects.filter(user=user, voucher=voucher).count() == 1


@browser_test
def test_staff_switch_a_strategy_on_a_phone(page, live_server, make_user, make_pool):
    make_user("gina", staff=True)
    pool = make_pool(strategy="db_atomic")
    log_in(page, live_server, "gina")
    page.goto(f"{live_server.url}/pools/{pool.pk}/")
    assert fits(page), "the pool page with its strategy form scrolls sideways on a phone"
    page.get_by_label("Switch to").select_option("none")
    page.once("dialog", lambda dialog: dialog.accept())  # it asks first (tests/test_pages_browser.py)
    page.get_by_role("button", name="Switch").click()
    expect(page.get_by_test_id("strategy")).to_have_text("none")
    expect(page.get_by_test_id("strategy-unsafe")).to_have_text("unsafe")
    assert Pool.objects.get(pk=pool.pk).strategy == "none"
