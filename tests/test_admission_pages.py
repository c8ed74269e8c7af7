"""The waiting room on the pages: an item with a queue shows Join instead of Buy or Draw; a
buyer who joined sees their place, kept live by the item's polled part; once admitted, the
button carries the ticket and takes with it. Real MariaDB and Redis, through Django's client
(the browser's view of it: tests/test_admission_browser.py)."""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta

import pytest

from .test_idempotency import keys  # noqa: F401 (autouse: no key or rate counter of an earlier test)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("rooms")]


def button_headers(page: str, testid: str) -> dict:
    found = re.search(rf"data-testid=\"{testid}\"[^>]*hx-headers='([^']*)'", page)
    assert found, page
    return json.loads(html.unescape(found.group(1)))


@pytest.fixture
def buyer(client, make_user):
    client.force_login(make_user())
    return client


def test_a_buyer_joins_sees_their_place_and_buys_with_the_ticket(buyer, client, make_voucher, make_user):
    voucher = make_voucher(stock=2, admission="queue", admission_rate=1000.0)
    live = f"/vouchers/{voucher.pk}/live"
    page = buyer.get(f"/vouchers/{voucher.pk}/").content.decode()
    assert 'data-testid="join"' in page and 'data-testid="buy"' not in page
    joined = buyer.post(f"/vouchers/{voucher.pk}/queue")
    assert (joined.status_code, joined["HX-Trigger"]) == (204, "bought")
    part = buyer.get(live).content.decode()
    if 'data-testid="queue-admitted"' not in part:
        assert "in line" in part
        part = buyer.get(live).content.decode()
    assert "It is your turn" in part
    headers = button_headers(part, "buy")
    bought = buyer.post(f"/vouchers/{voucher.pk}/buy", headers=headers)
    assert 'data-outcome="bought"' in bought.content.decode()
    assert "You bought this voucher" in buyer.get(live).content.decode()


def test_a_buy_without_the_ticket_is_refused_in_words(buyer, make_voucher):
    voucher = make_voucher(stock=2, admission="queue", admission_rate=1000.0)
    refused = buyer.post(f"/vouchers/{voucher.pk}/buy")
    assert "join its queue" in refused.content.decode()


def test_the_lobby_is_shown_before_the_opening(buyer, make_voucher):
    voucher = make_voucher(stock=2, admission="queue", starts_in=timedelta(minutes=5))
    assert "random order" in buyer.get(f"/vouchers/{voucher.pk}/live").content.decode()
    buyer.post(f"/vouchers/{voucher.pk}/queue")
    assert "You are in the lobby with 1 waiting" in buyer.get(f"/vouchers/{voucher.pk}/live").content.decode()


def test_someone_not_logged_in_is_asked_to_log_in_to_join(client, make_voucher):
    voucher = make_voucher(admission="queue")
    assert "to join its queue" in client.get(f"/vouchers/{voucher.pk}/").content.decode()


def test_a_pool_with_a_queue_draws_with_the_ticket(buyer, make_pool):
    pool = make_pool(admission="queue", admission_rate=1000.0)
    standing = f"/pools/{pool.pk}/standing"
    assert 'data-testid="join"' in buyer.get(standing).content.decode()
    buyer.post(f"/pools/{pool.pk}/queue")
    part = buyer.get(standing).content.decode()
    if 'data-testid="queue-admitted"' not in part:
        part = buyer.get(standing).content.decode()
    drawn = buyer.post(f"/pools/{pool.pk}/draw", headers=button_headers(part, "draw"))
    assert 'data-outcome="won"' in drawn.content.decode(), drawn.content


def test_staff_set_the_waiting_room_in_the_admin(admin_client_, make_voucher):
    from orders.models import Voucher

    from .test_hold_admin import voucher_form

    voucher = make_voucher(title="Kept")
    change = f"/admin/orders/voucher/{voucher.pk}/change/"
    assert "admission_rate" in admin_client_.get(change).content.decode()
    form = voucher_form(admission="queue", admission_rate="2.5", admission_ticket_seconds="45")
    assert admin_client_.post(change, form).status_code == 302
    voucher = Voucher.objects.get(pk=voucher.pk)
    assert (voucher.admission, voucher.admission_rate, voucher.admission_ticket_seconds) == ("queue", 2.5, 45)
    refused = admin_client_.post(change, voucher_form(admission_ticket_seconds="2"))
    assert list(refused.context["adminform"].form.errors) == ["admission_ticket_seconds"]
    assert admin_client_.post(change, voucher_form()).status_code == 302  # left out: kept
    assert Voucher.objects.get(pk=voucher.pk).admission == "queue"


def test_joins_and_polls_through_the_pages_count_against_the_queues_rate_limits(buyer, make_voucher, settings):
    """Each moves the room by a script, as the API's do: over the limits, the Join button and the
    polled part answer 429 with Retry-After (htmx keeps the part it shows), the room not moved."""
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"queue": {"user": (3, 60)}}
    voucher = make_voucher(stock=2, admission="queue", admission_rate=0.1)
    live = f"/vouchers/{voucher.pk}/live"
    assert buyer.post(f"/vouchers/{voucher.pk}/queue").status_code == 204
    assert [buyer.get(live).status_code for _ in range(2)] == [200, 200]
    for over in (buyer.get(live), buyer.post(f"/vouchers/{voucher.pk}/queue")):
        assert over.status_code == 429 and int(over["Retry-After"]) >= 1
