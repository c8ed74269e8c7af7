"""What a newcomer read on the pages, through the test client: one time format with its zone,
the links a visitor looks for (Sales, my draws, the API's documentation and back), no fact
said twice, the admin's lists and prize rows, and pages that no cache keeps stale."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from inventory.models import Stock
from inventory.totals import totals_recount
from lottery.models import Prize
from lottery.services import pool_draw
from orders.models import Order
from orders.product import VOUCHER
from orders.services import order_purchase
from tests.stock import stock_row

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
# core.moments: "Nov 25, 10:59 UTC", and the year when it is not this one.
MOMENT = re.compile(r"[A-Z][a-z]{2} [0-9]{1,2}( [0-9]{4})?, [0-9]{2}:[0-9]{2} UTC")
TIME_ELEMENT = re.compile(r'<time datetime="([^"]+)">([^<]*)</time>')

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def visible_text(html: str) -> str:
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r"<!--.*?-->|\{#.*?#\}", " ", html, flags=re.S).replace("<wbr>", "")
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- times --------------------------------------------------------------------------------------


def test_every_time_on_the_pages_is_one_format_with_its_zone(make_user, make_voucher, make_pool):
    user = make_user()
    live = make_voucher(title="Live one")
    upcoming = make_voucher(title="Next one", starts_in=3 * HOUR)
    far = make_voucher(title="Next year", starts_in=timedelta(days=400))
    order_purchase(user=user, voucher=live)
    pool = make_pool(no_prize_weight=5)
    later = make_pool(name="Later pool", starts_in=2 * HOUR)
    pool_draw(user=user, pool=pool)
    client = logged_in(user)
    pages = {
        url: client.get(url).content.decode()
        for url in ("/", "/pools/", f"/vouchers/{upcoming.pk}/", f"/pools/{later.pk}/", "/orders/", "/draws/")
    }
    for url, html in pages.items():
        moments = TIME_ELEMENT.findall(html)
        assert moments, url
        for _instant, text in moments:
            assert MOMENT.fullmatch(text), (url, text)
        # No time written any other way: every hh:mm on the page is inside a <time>.
        outside = visible_text(TIME_ELEMENT.sub(" ", html))
        assert not re.search(r"[0-9]{1,2}:[0-9]{2}", outside), (url, outside)
    rows = pages["/"]
    assert f'starts <time datetime="{upcoming.begin_at.isoformat()}">' in rows
    assert re.search(r"starts <time[^>]*>[A-Z][a-z]{2} [0-9]+ [0-9]{4}, [0-9:]+ UTC</time>", rows)  # next year's
    assert far.title in rows


def test_the_admin_lists_write_times_as_the_pages_do(admin_client_, make_user, make_voucher):
    voucher = make_voucher()
    order_purchase(user=make_user(), voucher=voucher)
    vouchers = admin_client_.get("/admin/orders/voucher/").content.decode()
    window = re.search(r'<td class="field-window">live: ([^<]*) – ([^<]*)</td>', vouchers)
    assert window and MOMENT.fullmatch(window[1]) and MOMENT.fullmatch(window[2])
    orders = admin_client_.get("/admin/orders/order/").content.decode()
    created = re.search(r'<td class="field-created">([^<]*)</td>', orders)
    assert created and MOMENT.fullmatch(created[1])


# --- navigation and links -----------------------------------------------------------------------


def test_the_header_leads_to_the_sales_and_my_draws(client, make_user):
    anonymous = client.get("/pools/").content.decode()
    assert 'href="/" data-testid="sales-link">Sales</a>' in anonymous
    assert "/draws/" not in anonymous
    page = logged_in(make_user()).get("/orders/").content.decode()
    assert 'href="/" data-testid="sales-link">Sales</a>' in page
    assert 'href="/draws/" data-testid="draws-link">My draws</a>' in page


def test_my_draws_across_pools_needs_a_login_and_shows_only_mine(client, make_user, make_pool):
    response = client.get("/draws/")
    assert response.status_code == 302 and response["Location"].startswith("/login/?next=/draws/")
    me, other = make_user(), make_user()
    first, second = make_pool(name="First wheel"), make_pool(name="Second wheel", prizes=(("Kite", 5),))
    mine = [pool_draw(user=me, pool=first), pool_draw(user=me, pool=second)]
    theirs = pool_draw(user=other, pool=second)
    page = logged_in(me).get("/draws/").content.decode()
    for draw in mine:
        assert f'data-testid="draw-{draw.public_id}"' in page
    assert f'data-testid="draw-{theirs.public_id}"' not in page
    assert f'href="/pools/{first.pk}/">First wheel</a>' in page
    assert f'href="/pools/{second.pk}/">Second wheel</a>' in page
    assert "Kite" in page


def test_the_site_and_the_api_documentation_link_to_each_other(client):
    assert 'href="/api/docs" data-testid="api-docs-link"' in client.get("/").content.decode()
    docs = client.get("/api/docs")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    assert 'href="/" data-testid="site-link"' in html
    assert 'id="swagger-ui"' in html


# --- said once ----------------------------------------------------------------------------------


def test_an_empty_pool_says_so_once(client, make_user, make_pool):
    pool = make_pool(prizes=(("Gold", 1),))
    pool_draw(user=make_user(), pool=pool)
    for viewer in (client, logged_in(make_user())):
        page = visible_text(viewer.get(f"/pools/{pool.pk}/").content.decode())
        assert page.count("Every prize has been won.") == 1, page


def test_the_demo_item_pages_state_the_strategy_once(client):
    from django.core.management import call_command

    from lottery.models import Pool
    from orders.models import Voucher

    call_command("seed_demo", "--quiet")
    urls = [f"/vouchers/{pk}/" for pk in Voucher.objects.values_list("pk", flat=True)]
    urls += [f"/pools/{pk}/" for pk in Pool.objects.values_list("pk", flat=True)]
    for url in urls:
        page = visible_text(client.get(url).content.decode())
        assert page.count("db_atomic") == 1, (url, page)


def test_the_strategy_switch_asks_first(client, make_user, make_voucher):
    voucher = make_voucher(title="Ask me", strategy="db_atomic")
    page = logged_in(make_user(staff=True)).get(f"/vouchers/{voucher.pk}/").content.decode()
    form = re.search(r'<form [^>]*data-testid="strategy-switch"[^>]*>', page)[0]
    assert 'data-confirm="Switch “Ask me” from db_atomic to {choice}?' in form
    assert '<script src="/static/js/site.js"></script>' in page


# --- no page with live state is kept ------------------------------------------------------------


def test_pages_with_live_state_are_never_stored(client, make_user, make_voucher, make_pool):
    user = make_user()
    voucher = make_voucher()
    pool = make_pool()
    order = order_purchase(user=user, voucher=voucher)
    draw = pool_draw(user=user, pool=pool)
    viewer = logged_in(user)
    urls = [
        "/",
        "/vouchers/stock",
        f"/vouchers/{voucher.pk}/",
        f"/vouchers/{voucher.pk}/live",
        f"/orders/{order.public_id}/status",
        "/orders/",
        "/pools/",
        "/pools/rows",
        f"/pools/{pool.pk}/",
        f"/pools/{pool.pk}/odds",
        f"/pools/{pool.pk}/standing",
        f"/draws/{draw.public_id}/status",
        "/draws/",
    ]
    for url in urls:
        response = viewer.get(url)
        assert response.status_code == 200, url
        assert "no-store" in response.get("Cache-Control", ""), url


# --- the admin ----------------------------------------------------------------------------------


def test_the_voucher_list_shows_what_is_sold_and_an_oversell(admin_client_, make_user, make_voucher):
    held, oversold = make_voucher(title="Held", stock=3), make_voucher(title="Oversold", stock=1)
    order_purchase(user=make_user(), voucher=held)
    # What the naive strategies leave: more orders than units supplied, with the running
    # totals their writes keep.
    for _ in range(3):
        Order.objects.create(user=make_user(), voucher=oversold, stock_id=stock_row(oversold))
    Stock.objects.filter(pk=stock_row(oversold)).update(quantity=0)
    totals_recount(VOUCHER, item_ids=[oversold.pk])
    page = admin_client_.get("/admin/orders/voucher/").content.decode()
    assert '<th scope="col" class="column-sold">' in page
    cells = re.findall(r'<td class="field-sold">(.*?)</td>', page)
    assert sorted(cells) == ["1", "3 <strong>oversold 2</strong>"]


def test_an_existing_prizes_initial_stock_is_read_only(admin_client_, make_pool):
    pool = make_pool(prizes=(("Gold", 2),))
    gold = pool.prizes.get()
    page = admin_client_.get(f"/admin/lottery/pool/{pool.pk}/change/").content.decode()
    existing = re.search(r'<input [^>]*name="prizes-0-initial_stock"[^>]*>', page)[0]
    assert " disabled" in existing
    new = re.search(r'<input [^>]*name="prizes-1-initial_stock"[^>]*>', page)[0]
    assert " disabled" not in new
    begin = timezone.localtime(pool.begin_at)
    end = timezone.localtime(pool.end_at)
    data = {
        "name": pool.name,
        "description": "",
        "begin_at_0": begin.strftime("%Y-%m-%d"),
        "begin_at_1": begin.strftime("%H:%M:%S"),
        "end_at_0": end.strftime("%Y-%m-%d"),
        "end_at_1": end.strftime("%H:%M:%S"),
        "draws_per_user": "3",
        "no_prize_weight": "0",
        "strategy": "db_atomic",
        "prizes-TOTAL_FORMS": "1",
        "prizes-INITIAL_FORMS": "1",
        "prizes-MIN_NUM_FORMS": "0",
        "prizes-MAX_NUM_FORMS": "1000",
        "prizes-0-id": str(gold.pk),
        "prizes-0-pool": str(pool.pk),
        "prizes-0-name": "Gold",
        "prizes-0-description": "",
        "prizes-0-value": "0.00",
        "prizes-0-initial_stock": "999",
    }
    response = admin_client_.post(f"/admin/lottery/pool/{pool.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[-2000:]
    stock = Prize.objects.select_related("stock").get(pk=gold.pk).stock
    assert (stock.quantity, stock.initial_quantity) == (2, 2)


def test_no_template_writes_a_time_its_own_way():
    """Every page writes times through the ``moment`` filter (one format, with its zone):
    a template that formats one with Django's ``date`` or ``time`` filter would be a fifth."""
    own_way = {
        str(path.relative_to(TEMPLATES)): line.strip()
        for path in TEMPLATES.rglob("*.html")
        for line in path.read_text().splitlines()
        if re.search(r"\|\s*(date|time)\b", line)
    }
    assert not own_way, own_way
