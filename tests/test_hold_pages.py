"""The lifecycle on the pages (docs/design.md, "The pages"): a held order with its countdown,
Pay and Cancel, a won prize with Claim, and every state after them in words, through the
same services as the API; through the test client (the browser's part is
tests/test_hold_pages_browser.py)."""

from __future__ import annotations

import random
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from inventory.holds import holds_expire_due
from inventory.models import Stock
from inventory.templatetags.holds import duration
from lottery.models import Draw, Pool
from lottery.product import POOL
from lottery.selectors import pool_get
from lottery.services import pool_draw
from orders.models import Order, Voucher
from orders.product import VOUCHER
from orders.selectors import order_get, voucher_get
from orders.services import order_cancel, order_purchase
from payments.models import Payment
from payments.selectors import payments_audit
from payments.services import payment_confirm
from tests.stock import stock_left

from .test_page_text import MOMENT, TIME_ELEMENT, visible_text

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("payment_provider")]

WINDOW = 900  # 15 minutes


@pytest.fixture
def held_voucher(make_voucher):
    def make(*, window: int = WINDOW, stock: int = 3, **voucher) -> Voucher:
        voucher = make_voucher(stock=stock, **voucher)
        Voucher.objects.filter(pk=voucher.pk).update(hold_seconds=window)
        return voucher_get(voucher_id=voucher.pk)

    return make


@pytest.fixture
def held_pool(make_pool):
    def make(*, window: int = WINDOW, **pool) -> Pool:
        made = make_pool(**pool)
        Pool.objects.filter(pk=made.pk).update(hold_seconds=window)
        return pool_get(pool_id=made.pk)

    return make


def logged_in(user, **client) -> Client:
    client = Client(**client)
    client.force_login(user)
    return client


def fragment(content: bytes) -> tuple[str, str]:
    """The outcome of a fragment and its opening tag."""
    tag = re.search(r'<(?:p|div) [^>]*data-outcome="(\w+)"[^>]*>', content.decode())
    assert tag, content.decode()
    return tag.group(1), tag.group()


def text_of(html: str) -> str:
    """The words of a fragment, an inline tag joining its words as the browser joins them."""
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def stock_of(voucher: Voucher) -> int:
    return stock_left(voucher)


def buy(client: Client, voucher: Voucher) -> tuple[Order, bytes]:
    answer = client.post(reverse("pages:voucher_buy", args=[voucher.pk]))
    assert answer.status_code == 200
    return Order.objects.filter(voucher=voucher).latest("pk"), answer.content


def post(client: Client, name: str, record_id: int):
    return client.post(reverse(name, args=[record_id]))


# --- the item pages say the window ------------------------------------------------------------


def test_the_item_pages_say_the_hold_window(client, held_voucher, held_pool, make_voucher, make_pool):
    voucher, pool = held_voucher(window=WINDOW), held_pool(window=5400)
    page = visible_text(client.get(reverse("pages:voucher_detail", args=[voucher.pk])).content.decode())
    assert "Pay within 15 minutes of buying, or the order expires." in page
    page = visible_text(client.get(reverse("lottery:pool_detail", args=[pool.pk])).content.decode())
    assert "Claim a prize within 1 hour 30 minutes of winning it, or it goes back to the pool." in page
    for url in (
        reverse("pages:voucher_detail", args=[make_voucher().pk]),
        reverse("lottery:pool_detail", args=[make_pool().pk]),
    ):
        assert 'data-testid="hold-window"' not in client.get(url).content.decode()


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(0, "0 seconds"), (1, "1 second"), (60, "1 minute"), (899, "14 minutes 59 seconds"), (86_400, "1 day")],
)
def test_a_length_of_time_is_said_in_words(seconds, words):
    assert duration(seconds) == words


# --- a held order: its countdown, Pay and Cancel ----------------------------------------------


def test_a_purchase_with_a_window_is_held_with_its_deadline_pay_and_cancel(make_user, held_voucher):
    client, voucher = logged_in(make_user()), held_voucher()
    order, content = buy(client, voucher)
    assert order.status == Order.Status.HELD
    outcome, tag = fragment(content)
    assert outcome == "held"
    # Asked again once, at its deadline (static/js/holds.js raises "deadline").
    assert f'hx-get="{reverse("pages:order_status", args=[order.public_id])}"' in tag and 'hx-trigger="deadline"' in tag
    html = content.decode()
    left = int(re.search(r'data-seconds-left="(\d+)"', html).group(1))
    assert WINDOW - 5 <= left <= WINDOW
    assert f'<time datetime="{order.hold_until.isoformat()}">' in html
    assert f'hx-post="{reverse("payments:order_pay", args=[order.public_id])}"' in html
    assert f'hx-post="{reverse("pages:order_cancel", args=[order.public_id])}"' in html
    words = visible_text(html)
    assert re.search(rf"Order #{order.public_id} is held for you: pay by {MOMENT.pattern} \( ?1[45] minutes", words), (
        words
    )
    live = client.get(reverse("pages:voucher_live", args=[voucher.pk])).content.decode()
    assert 'data-testid="held"' in live and 'data-reason="already_purchased"' in live


def test_cancel_releases_the_unit_and_the_buyer_may_buy_again(make_user, held_voucher):
    # No cooldown after a cancel (docs/design.md, "Abandoned holds"): the buyer buys again at once.
    client, voucher = logged_in(make_user()), held_voucher(stock=2, abandon_cooldown_seconds=0)
    order, _ = buy(client, voucher)
    assert stock_of(voucher) == 1
    answer = post(client, "pages:order_cancel", order.public_id)
    assert answer["HX-Trigger"] == "bought"  # the live part reloads: the unit is back on sale
    assert fragment(answer.content)[0] == "cancelled"
    assert f"Order #{order.public_id} is cancelled: its unit went back on sale." in visible_text(
        answer.content.decode()
    )
    assert 'data-testid="pay"' not in answer.content.decode()
    order.refresh_from_db()
    assert (order.status, stock_of(voucher)) == (Order.Status.CANCELLED, 2)
    live = client.get(reverse("pages:voucher_live", args=[voucher.pk])).content.decode()
    assert re.search(r'<button class="buy" data-testid="buy" hx-post=', live)
    assert fragment(buy(client, voucher)[1])[0] == "held"


def test_pay_pays_the_order_and_the_payments_add_up(make_user, held_voucher):
    client, voucher = logged_in(make_user()), held_voucher()
    order, _ = buy(client, voucher)
    answer = post(client, "payments:order_pay", order.public_id)
    assert answer.status_code == 200 and answer["HX-Trigger"] == "bought"
    assert fragment(answer.content)[0] == "paid"
    assert f"Paid! Order #{order.public_id} is yours." in visible_text(answer.content.decode())
    order.refresh_from_db()
    assert order.status == Order.Status.PAID
    audit = payments_audit(voucher_id=voucher.pk)
    assert (audit.confirmations, audit.paid, audit.refunded, audit.ok) == (1, 1, 0, True)
    live = client.get(reverse("pages:voucher_live", args=[voucher.pk])).content.decode()
    assert "You bought this voucher." in live


def test_a_payment_on_its_way_is_pending_and_asked_about_until_it_is_paid(make_user, held_voucher, payment_provider):
    payment_provider.PAYMENT_PROVIDER_DELAY_MS = 500
    client, voucher = logged_in(make_user()), held_voucher()
    order, _ = buy(client, voucher)
    answer = post(client, "payments:order_pay", order.public_id)
    outcome, tag = fragment(answer.content)
    status = reverse("pages:order_status", args=[order.public_id])
    assert outcome == "payment_pending"
    assert f'hx-get="{status}"' in tag and 'hx-trigger="every 1s"' in tag and 'hx-swap="outerHTML"' in tag
    assert "payment pending" in visible_text(answer.content.decode())
    polled = client.get(status)
    assert fragment(polled.content)[0] == "payment_pending"
    assert "HX-Trigger" not in polled  # nothing changed yet: the live part is left alone
    payment_confirm(reference=Payment.objects.get(order=order).reference)
    polled = client.get(status)
    assert fragment(polled.content)[0] == "paid"
    assert polled["HX-Trigger"] == "bought"


def test_a_payment_that_comes_after_a_cancel_is_refunded_with_its_reason(make_user, held_voucher, payment_provider):
    payment_provider.PAYMENT_PROVIDER_DELAY_MS = 500
    user = make_user()
    client, voucher = logged_in(user), held_voucher()
    order, _ = buy(client, voucher)
    post(client, "payments:order_pay", order.public_id)
    order_cancel(order=order_get(user=user, order_id=order.public_id))  # from another tab, or the API
    status = reverse("pages:order_status", args=[order.public_id])
    assert fragment(client.get(status).content)[0] == "payment_pending"  # the confirmation decides
    payment_confirm(reference=Payment.objects.get(order=order).reference)
    polled = client.get(status)
    outcome, _ = fragment(polled.content)
    assert outcome == "refunded"
    words = visible_text(polled.content.decode())
    assert f"Order #{order.public_id} is not yours: its payment came after it was cancelled, and was refunded" in words
    assert 'data-reason="cancelled"' in polled.content.decode()
    listed = client.get(reverse("pages:order_list")).content.decode()
    assert 'data-outcome="refunded"' in listed


def test_a_refused_change_says_why_in_the_services_words_and_shows_the_order_as_it_is(make_user, held_voucher):
    client, voucher = logged_in(make_user()), held_voucher()
    order, _ = buy(client, voucher)
    post(client, "payments:order_pay", order.public_id)
    for name in ("pages:order_cancel", "payments:order_pay"):
        answer = post(client, name, order.public_id)
        assert fragment(answer.content)[0] == "paid"
        assert 'data-refusal="already_paid"' in answer.content.decode()
        assert "This order is paid already." in visible_text(answer.content.decode())
    assert Order.objects.get(pk=order.pk).status == Order.Status.PAID
    assert Payment.objects.filter(order=order).count() == 1


def test_past_its_deadline_an_order_shows_expired_and_is_neither_paid_nor_cancelled(make_user, held_voucher):
    client, voucher = logged_in(make_user()), held_voucher()
    order, _ = buy(client, voucher)
    Order.objects.filter(pk=order.pk).update(hold_until=timezone.now() - timedelta(seconds=1))
    # Before the expiry has run: shown as it will be, with nothing to press.
    polled = client.get(reverse("pages:order_status", args=[order.public_id]))
    assert fragment(polled.content)[0] == "expired"
    assert 'data-testid="pay"' not in polled.content.decode()
    answer = post(client, "payments:order_pay", order.public_id)
    assert fragment(answer.content)[0] == "expired"
    assert 'data-refusal="expired"' in answer.content.decode()
    assert f"Order #{order.public_id} expired unpaid: its unit went back on sale." in visible_text(
        answer.content.decode()
    )
    assert not Payment.objects.exists()
    assert Order.objects.get(pk=order.pk).status == Order.Status.EXPIRED  # the pay lapsed it
    assert 'data-refusal="expired"' in post(client, "pages:order_cancel", order.public_id).content.decode()


def test_a_cancel_past_its_deadline_is_refused_expired_and_releases_the_order_as_the_expiry_would(
    make_user, held_voucher
):
    client, voucher = logged_in(make_user()), held_voucher(stock=2)
    order, _ = buy(client, voucher)
    Order.objects.filter(pk=order.pk).update(hold_until=timezone.now() - timedelta(seconds=1))
    answer = post(client, "pages:order_cancel", order.public_id)
    assert 'data-refusal="expired"' in answer.content.decode()
    assert Order.objects.get(pk=order.pk).status == Order.Status.EXPIRED
    assert stock_of(voucher) == 2 and holds_expire_due(VOUCHER) == 0  # back once, by the cancel's lapse


def test_the_buttons_need_the_csrf_token(make_user, held_voucher, held_pool):
    user = make_user()
    voucher, pool = held_voucher(), held_pool(prizes=(("Gold", 2),))
    order, draw = order_purchase(user=user, voucher=voucher), pool_draw(user=user, pool=pool)
    client = logged_in(user, enforce_csrf_checks=True)
    for name, record in (("payments:order_pay", order), ("pages:order_cancel", order), ("lottery:draw_claim", draw)):
        assert post(client, name, record.public_id).status_code == 403
    assert Order.objects.get(pk=order.pk).status == Draw.objects.get(pk=draw.pk).status == "held"
    # With the page's token, as htmx sends it (base.html's hx-headers).
    page = client.get(reverse("pages:voucher_detail", args=[voucher.pk])).content.decode()
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page).group(1)
    answer = client.post(reverse("pages:order_cancel", args=[order.public_id]), headers={"X-CSRFToken": token})
    assert fragment(answer.content)[0] == "cancelled"


def test_another_users_order_or_draw_is_404_and_changes_nothing(make_user, held_voucher, held_pool):
    owner, other = make_user(), make_user()
    order = order_purchase(user=owner, voucher=held_voucher())
    draw = pool_draw(user=owner, pool=held_pool(prizes=(("Gold", 2),)))
    client = logged_in(other)
    for name, record in (("payments:order_pay", order), ("pages:order_cancel", order), ("lottery:draw_claim", draw)):
        assert post(client, name, record.public_id).status_code == 404
    assert Order.objects.get(pk=order.pk).status == Draw.objects.get(pk=draw.pk).status == "held"
    assert not Payment.objects.exists()


def test_the_buttons_take_only_posts_and_ask_a_visitor_to_log_in(client, make_user, held_voucher):
    order = order_purchase(user=make_user(), voucher=held_voucher())
    for name in ("payments:order_pay", "pages:order_cancel"):
        assert client.get(reverse(name, args=[order.public_id])).status_code == 405
        answer = post(client, name, order.public_id)
        assert fragment(answer.content)[0] == "login"
    assert Order.objects.get(pk=order.pk).status == Order.Status.HELD


def test_my_orders_shows_each_state_and_every_time_as_a_moment(make_user, held_voucher, make_voucher):
    user = make_user()
    client = logged_in(user)
    vouchers = [held_voucher() for _ in range(4)]
    held, paid, cancelled, expired = (order_purchase(user=user, voucher=voucher) for voucher in vouchers)
    plain = order_purchase(user=user, voucher=make_voucher())
    post(client, "payments:order_pay", paid.public_id)
    order_cancel(order=order_get(user=user, order_id=cancelled.public_id))
    Order.objects.filter(pk=expired.pk).update(hold_until=timezone.now() - timedelta(seconds=1))
    assert holds_expire_due(VOUCHER) == 1
    html = client.get(reverse("pages:order_list")).content.decode()
    for order, outcome in ((held, "held"), (paid, "paid"), (cancelled, "cancelled"), (expired, "expired")):
        item = re.search(rf'<li data-testid="order-{order.public_id}">(.*?)</li>', html, re.S).group(1)
        assert f'data-outcome="{outcome}"' in item, (outcome, item)
        assert ('data-testid="pay"' in item) == ('data-testid="cancel"' in item) == (outcome == "held")
    assert f'data-testid="order-status-{plain.public_id}">confirmed<' in html  # no window: as before
    for _instant, text in TIME_ELEMENT.findall(html):
        assert MOMENT.fullmatch(text), text
    assert not re.search(r"[0-9]{1,2}:[0-9]{2}", visible_text(TIME_ELEMENT.sub(" ", html)))


# --- a won prize: its countdown and Claim -------------------------------------------------------


def test_a_prize_won_with_a_window_is_held_then_claimed(make_user, held_pool):
    client, pool = logged_in(make_user()), held_pool(prizes=(("Gold", 2),))
    answer = client.post(reverse("lottery:pool_draw", args=[pool.pk]))
    draw = Draw.objects.get(pool=pool)
    outcome, tag = fragment(answer.content)
    assert (outcome, draw.status) == ("held", Draw.Status.HELD)
    assert f'hx-get="{reverse("lottery:draw_status", args=[draw.public_id])}"' in tag and 'hx-trigger="deadline"' in tag
    html = answer.content.decode()
    assert f'hx-post="{reverse("lottery:draw_claim", args=[draw.public_id])}"' in html
    assert re.search(rf"You won Gold ?! Claim it by {MOMENT.pattern} \( ?1[45] minutes", visible_text(html))
    # The standing lists it with its Claim, synced with the standing's polls as Draw is.
    standing = client.get(reverse("lottery:pool_standing", args=[pool.pk])).content.decode()
    item = re.search(rf'<li data-testid="draw-{draw.public_id}">(.*?)</li>', standing, re.S).group(1)
    assert 'data-testid="claim"' in item and 'hx-sync="#standing:replace"' in item
    assert "data-refusal" not in item  # the standing's own refusal (none here) is not the draw's

    claimed = post(client, "lottery:draw_claim", draw.public_id)
    assert claimed["HX-Trigger"] == "drawn"
    assert fragment(claimed.content)[0] == "claimed"
    assert "Gold is yours: claimed." in text_of(claimed.content.decode())
    assert Draw.objects.get(pk=draw.pk).status == Draw.Status.CLAIMED
    again = post(client, "lottery:draw_claim", draw.public_id)
    assert 'data-refusal="already_claimed"' in again.content.decode()
    assert "This prize is claimed already." in visible_text(again.content.decode())
    listed = client.get(reverse("lottery:draw_list")).content.decode()
    assert re.search(rf'<li data-testid="draw-{draw.public_id}">.*data-outcome="claimed"', listed, re.S)


def test_an_unclaimed_prize_is_forfeited_and_its_claim_refused(make_user, held_pool):
    user = make_user()
    client, pool = logged_in(user), held_pool(prizes=(("Gold", 1),), draws_per_user=2)
    draw = pool_draw(user=user, pool=pool)
    Draw.objects.filter(pk=draw.pk).update(hold_until=timezone.now() - timedelta(seconds=1))
    assert holds_expire_due(POOL) == 1
    polled = client.get(reverse("lottery:draw_status", args=[draw.public_id]))
    assert fragment(polled.content)[0] == "forfeited"
    assert "Gold was not claimed in time: it went back to the pool." in text_of(polled.content.decode())
    answer = post(client, "lottery:draw_claim", draw.public_id)
    assert 'data-refusal="forfeited"' in answer.content.decode()
    standing = client.get(reverse("lottery:pool_standing", args=[pool.pk])).content.decode()
    assert 'data-outcome="forfeited"' in standing
    assert Stock.objects.get(pk=pool.prizes.get().stock_id).quantity == 1


def test_a_draw_of_no_prize_is_settled_with_nothing_to_claim(make_user, held_pool):
    user = make_user()
    client, pool = logged_in(user), held_pool(prizes=(("Gold", 1),), no_prize_weight=999)
    draw = pool_draw(user=user, pool=pool, rng=random.Random(0))
    assert (draw.prize, draw.status) == (None, Draw.Status.CONFIRMED)
    assert fragment(client.get(reverse("lottery:draw_status", args=[draw.public_id])).content)[0] == "no_prize"
    refused = post(client, "lottery:draw_claim", draw.public_id)
    assert 'data-outcome="no_prize"' in refused.content.decode()
    assert Draw.objects.get(pk=draw.pk).status == Draw.Status.CONFIRMED
