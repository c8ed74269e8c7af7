"""The prize draw's pages: in Debian's Chromium driven by Playwright, and through the
test client for what needs no browser."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from lottery.models import Draw
from lottery.selectors import pool_audit
from lottery.services import pool_draw
from tests import test_browser
from tests.test_browser import log_in

# Chromium and a phone-sized page, registered in this module too: pytest finds fixtures by name.
browser = test_browser.browser
page = test_browser.page


def browser_test(test):
    """Drives Chromium against the live server, which sees only committed rows."""
    return pytest.mark.browser(pytest.mark.django_db(transaction=True)(test))


def csrf_header(page) -> dict[str, str]:
    return {"X-CSRFToken": next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")}


@browser_test
def test_log_in_draw_and_see_the_odds_and_my_draws_update(page, live_server, make_user, make_pool):
    user = make_user("alice")
    pool = make_pool(name="Lucky dip", prizes=(("Gold", 1), ("Silver", 19)), draws_per_user=3)
    gold, silver = pool.prizes.all()
    log_in(page, live_server, "alice")
    page.get_by_role("link", name="Prize draws").click()
    expect(page.get_by_test_id(f"pool-left-{pool.pk}")).to_have_text("20 of 20")
    expect(page.get_by_test_id(f"pool-draws-{pool.pk}")).to_have_text("3")
    expect(page.get_by_test_id(f"pool-row-{pool.pk}")).to_contain_text("live")
    page.get_by_role("link", name="Lucky dip").click()

    expect(page.get_by_test_id("countdown")).to_contain_text("Live: ends in")
    expect(page.get_by_test_id("strategy")).to_contain_text("db_atomic")
    expect(page.get_by_test_id(f"prize-odds-{gold.pk}")).to_have_text("5.0%")
    expect(page.get_by_test_id(f"prize-odds-{silver.pk}")).to_have_text("95.0%")
    expect(page.get_by_test_id("no-prize-odds")).to_have_text("0.0%")
    expect(page.get_by_test_id("draws-left")).to_have_text("3")
    expect(page.get_by_test_id("my-draws")).to_contain_text("No draws yet")

    page.get_by_test_id("draw").click()
    expect(page.locator("[data-outcome=won]")).to_be_visible()
    draw = Draw.objects.select_related("prize__stock").get(user=user)
    supplied = draw.prize.stock.initial_quantity
    expect(page.locator("[data-outcome=won]")).to_have_text(f"You won {draw.prize.name}!")
    expect(page.get_by_test_id("draws-left")).to_have_text("2")
    expect(page.get_by_test_id(f"prize-stock-{draw.prize_id}")).to_have_text(f"{supplied - 1} of {supplied} left")
    expect(page.get_by_test_id("my-draws").locator("li")).to_have_count(1)
    expect(page.get_by_test_id(f"draw-{draw.public_id}")).to_contain_text(draw.prize.name)
    expect(page.locator("[data-outcome=won]")).to_be_visible()  # the polls keep the outcome in view

    assert Draw.objects.filter(user=user).count() == 1
    audit = pool_audit(pool_id=pool.pk)
    assert (audit.stock + audit.awarded, audit.supplied, audit.awarded) == (20, 20, 1)
    assert audit.ok
    fits = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert fits, "the pool page scrolls sideways on a phone-width screen"


@browser_test
def test_the_odds_move_when_someone_else_draws(page, live_server, make_user, make_pool):
    pool = make_pool(prizes=(("Gold", 1), ("Silver", 19)), no_prize_weight=0)
    gold, silver = pool.prizes.all()
    page.goto(f"{live_server.url}/pools/{pool.pk}/")
    expect(page.get_by_test_id(f"prize-odds-{gold.pk}")).to_have_text("5.0%")
    expect(page.get_by_test_id(f"prize-stock-{silver.pk}")).to_have_text("19 of 19 left")

    draw = pool_draw(user=make_user(), pool=pool, rng=random.Random(0))  # ticket 12 of 20: a Silver

    assert draw.prize == silver
    expect(page.get_by_test_id(f"prize-stock-{silver.pk}")).to_contain_text("18 of 19 left")  # the page polls
    expect(page.get_by_test_id(f"prize-odds-{gold.pk}")).to_contain_text("5.3%")  # 1 in 19
    expect(page.get_by_test_id(f"prize-odds-{silver.pk}")).to_contain_text("94.7%")
    expect(page.get_by_test_id(f"prize-stock-{gold.pk}")).to_contain_text("1 of 1 left")


@browser_test
def test_the_last_draw_turns_the_button_off_and_another_is_refused(page, live_server, make_user, make_pool):
    user = make_user("bob")
    pool = make_pool(draws_per_user=1)
    log_in(page, live_server, "bob")
    page.goto(f"{live_server.url}/pools/{pool.pk}/")
    expect(page.get_by_test_id("draws-left")).to_have_text("1")
    page.get_by_test_id("draw").click()
    expect(page.locator("[data-outcome=won]")).to_be_visible()
    expect(page.get_by_test_id("draws-left")).to_have_text("0")
    expect(page.get_by_test_id("draw")).to_be_disabled()
    expect(page.get_by_test_id("no-draws-left")).to_be_visible()
    expect(page.locator("[data-outcome=won]")).to_be_visible()  # the button's change keeps the outcome in view

    # A second tab that still shows the button.
    response = page.context.request.post(f"{live_server.url}/pools/{pool.pk}/draw", headers=csrf_header(page))
    assert response.ok
    assert 'data-outcome="draw_limit"' in response.text()
    assert Draw.objects.filter(user=user).count() == 1
    assert pool_audit(pool_id=pool.pk).awarded == 1


@browser_test
def test_an_empty_pool_turns_draw_off_refuses_and_records_nothing(page, live_server, make_user, make_pool):
    make_user("carol")
    pool = make_pool(prizes=(("Gold", 0),))
    (gold,) = pool.prizes.all()
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}/pools/{pool.pk}/")
    expect(page.get_by_test_id(f"prize-stock-{gold.pk}")).to_have_text("0 of 0 left")
    expect(page.get_by_test_id(f"prize-odds-{gold.pk}")).to_have_text("0.0%")
    expect(page.get_by_test_id("draw")).to_be_disabled()
    expect(page.get_by_test_id("draw-reason")).to_have_text("Every prize has been won.")
    # A tab opened before the last prize was won still posts: refused, nothing counted.
    response = page.context.request.post(f"{live_server.url}/pools/{pool.pk}/draw", headers=csrf_header(page))
    assert 'data-outcome="pool_empty"' in response.text()
    expect(page.get_by_test_id("draws-left")).to_have_text("3")
    assert not Draw.objects.exists()


@browser_test
def test_not_started_shows_a_countdown_and_turns_draw_off(page, live_server, make_user, make_pool):
    make_user("dan")
    pool = make_pool(starts_in=timedelta(hours=2))
    log_in(page, live_server, "dan")
    page.goto(f"{live_server.url}/pools/{pool.pk}/")
    expect(page.get_by_test_id("countdown")).to_contain_text("Starts in 01:59")
    expect(page.get_by_test_id("draw")).to_be_disabled()
    expect(page.get_by_test_id("draw-reason")).to_contain_text("The draw opens")
    response = page.context.request.post(f"{live_server.url}/pools/{pool.pk}/draw", headers=csrf_header(page))
    assert 'data-outcome="not_started"' in response.text()
    assert not Draw.objects.exists()


@pytest.mark.django_db
def test_an_unknown_pool_is_404(client):
    assert client.get(reverse("lottery:pool_detail", args=[999_999])).status_code == 404
    assert client.get(reverse("lottery:pool_odds", args=[999_999])).status_code == 404
    assert client.post(reverse("lottery:pool_draw", args=[999_999])).status_code == 404


@pytest.mark.django_db
def test_an_anonymous_draw_asks_to_log_in_and_writes_nothing(client, make_pool):
    pool = make_pool()
    response = client.post(reverse("lottery:pool_draw", args=[pool.pk]))
    assert response.status_code == 200
    assert b'data-outcome="login"' in response.content
    assert f"/login/?next=/pools/{pool.pk}/".encode() in response.content
    assert not Draw.objects.exists()
    assert pool_audit(pool_id=pool.pk).stock == 20


@pytest.mark.django_db
def test_the_draw_answers_only_posts_and_the_reads_only_gets(client, make_pool):
    pool = make_pool()
    assert client.get(reverse("lottery:pool_draw", args=[pool.pk])).status_code == 405
    assert client.post(reverse("lottery:pool_detail", args=[pool.pk])).status_code == 405
    assert client.post(reverse("lottery:pool_list")).status_code == 405


@pytest.mark.django_db
def test_a_draw_tells_the_page_to_reload_the_odds_and_my_draws(client, make_user, make_pool):
    user = make_user()
    client.force_login(user)
    pool = make_pool(draws_per_user=1)
    response = client.post(reverse("lottery:pool_draw", args=[pool.pk]))
    assert response["HX-Trigger"] == "drawn"
    assert b'data-outcome="won"' in response.content
    standing = client.get(reverse("lottery:pool_standing", args=[pool.pk])).content.decode()
    assert 'data-testid="no-draws-left"' in standing
    assert 'data-testid="draw" disabled' in standing


@pytest.mark.django_db
def test_the_list_shows_each_pools_prizes_left(client, make_pool):
    live = make_pool(name="Live one", prizes=(("A", 2), ("B", 3)))
    empty = make_pool(name="Empty one", prizes=(("A", 0),))
    rows = client.get(reverse("lottery:pool_rows")).content.decode()
    assert "5 of 5" in rows
    assert "none left" in rows
    assert f'data-testid="pool-row-{live.pk}"' in rows and f'data-testid="pool-row-{empty.pk}"' in rows


@pytest.mark.django_db
def test_the_pools_page_lists_the_newest_page_of_my_draws_and_leads_to_the_rest(client, make_user, make_pool):
    """Polled every two seconds, the standing shows a page of the user's draws, not every one
    a limit of a million allows; the draws' own page pages through the rest."""
    from inventory.paging import PAGE_SIZE
    from lottery.services import pool_draw

    user = make_user()
    pool = make_pool(prizes=(("Gold", PAGE_SIZE + 10),), draws_per_user=PAGE_SIZE + 5)
    for _ in range(PAGE_SIZE + 1):
        pool_draw(user=user, pool=pool)
    client.force_login(user)
    standing = client.get(reverse("lottery:pool_standing", args=[pool.pk])).content.decode()
    assert standing.count('<li data-testid="draw-') == PAGE_SIZE
    assert f'href="{reverse("lottery:draw_list")}" data-testid="more-draws"' in standing
    assert f'data-testid="draws-left">{4}<' in standing  # counted apart from the page
    pool_draw(user=user, pool=pool)
    newest = client.get(reverse("lottery:pool_standing", args=[pool.pk])).content.decode()
    assert newest.count('<li data-testid="draw-') == PAGE_SIZE and 'data-testid="draws-left">3<' in newest
