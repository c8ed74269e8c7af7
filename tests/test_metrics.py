"""/metrics in this process (no multiprocess directory: the suite's process counts in
memory): the Prometheus text format with the requests by route, the purchase and draw
outcomes, the locks' events, redis_lua's backlog and reconciliation's drift, and who may
read it. Across gunicorn's worker processes: tests/test_metrics_gunicorn.py."""

from __future__ import annotations

import threading
import time

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from inventory.redis_lua.client import reservations_client
from inventory.tasks import reservations_reconcile
from locking import Lock
from locking.integration import locks_redis
from tests.clocks import Clock
from tests.stock import stock_row

from .waiting import wait_until

PURCHASE_ROUTE = "api/vouchers/<int:voucher_id>/purchase"


def scrape(client: Client | None = None, **extra) -> dict[tuple[str, frozenset], float]:
    """Every sample of /metrics, by name and labels."""
    response = (client or Client()).get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def grew(before, after, name: str, **labels) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reservations_redis")
def test_purchases_and_draws_through_the_api_show_by_strategy_outcome_and_route(api_client, make_voucher, make_pool):
    voucher = make_voucher(stock=1, strategy="db_atomic")
    lua = make_voucher(stock=5, strategy="redis_lua")
    pool = make_pool(prizes=(("Gold", 1),), draws_per_user=1, strategy="db_pessimistic")
    first, second = api_client(), api_client()
    before = scrape()

    assert first.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 201
    assert first.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 409  # already_purchased
    assert second.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 409  # sold_out
    assert first.post(f"/api/vouchers/{lua.pk}/purchase").status_code == 202
    assert first.post(f"/api/pools/{pool.pk}/draw").status_code == 201
    assert first.post(f"/api/pools/{pool.pk}/draw").status_code == 409  # draw_limit
    assert second.post(f"/api/pools/{pool.pk}/draw").status_code == 409  # pool_empty
    after = scrape()

    purchases = "flashsale_purchases_total"
    assert grew(before, after, purchases, strategy="db_atomic", outcome="confirmed") == 1
    assert grew(before, after, purchases, strategy="db_atomic", outcome="already_purchased") == 1
    assert grew(before, after, purchases, strategy="db_atomic", outcome="sold_out") == 1
    assert grew(before, after, purchases, strategy="redis_lua", outcome="pending") == 1
    draws = "flashsale_draws_total"
    assert grew(before, after, draws, strategy="db_pessimistic", outcome="confirmed") == 1
    assert grew(before, after, draws, strategy="db_pessimistic", outcome="draw_limit") == 1
    assert grew(before, after, draws, strategy="db_pessimistic", outcome="pool_empty") == 1

    requests = "flashsale_http_requests_total"
    assert grew(before, after, requests, method="POST", route=PURCHASE_ROUTE, status="201") == 1
    assert grew(before, after, requests, method="POST", route=PURCHASE_ROUTE, status="409") == 2
    assert grew(before, after, requests, method="POST", route=PURCHASE_ROUTE, status="202") == 1
    assert grew(before, after, requests, method="GET", route="metrics", status="200") == 1  # the first scrape
    timed = "flashsale_http_request_duration_seconds_count"
    assert grew(before, after, timed, method="POST", route=PURCHASE_ROUTE) == 4
    assert grew(before, after, "flashsale_http_request_duration_seconds_bucket", method="POST",
                route=PURCHASE_ROUTE, le="+Inf") == 4  # fmt: skip
    # No raw path, user or id in any label: a route is a pattern. (A status or a bucket's bound
    # is a number of its own, which an id may equal: a voucher 204 beside a 204 answer.)
    ours = [labels for name, labels in after if name.startswith("flashsale_")]
    named = [[(k, v) for k, v in labels if k not in ("status", "le")] for labels in ours]
    assert ours and not [labels for labels in named if any(str(voucher.pk) in v.split("/") for _, v in labels)]

    # The reservation answered 202 waits in Redis until a worker writes it.
    assert value(after, "flashsale_reservations_items", kind="voucher") == 1
    assert value(after, "flashsale_reservations_pending", kind="voucher") == 1
    assert value(after, "flashsale_reservations_pending", kind="pool") == 0
    assert 0 <= value(after, "flashsale_reservations_oldest_pending_seconds", kind="voucher") < 60
    assert value(after, "flashsale_reservations_scrape_ok") == 1


@pytest.mark.django_db
def test_the_pages_buy_and_draw_are_counted_as_the_apis_are(make_user, make_voucher, make_pool):
    voucher = make_voucher(stock=1, strategy="db_atomic")
    pool = make_pool(prizes=(("Gold", 1),), draws_per_user=1, strategy="db_pessimistic")
    page = Client()
    page.force_login(make_user())
    before = scrape()

    for _ in range(2):  # taken, then refused in the product's words
        assert page.post(f"/vouchers/{voucher.pk}/buy").status_code == 200
        assert page.post(f"/pools/{pool.pk}/draw").status_code == 200
    after = scrape()

    purchases, draws = "flashsale_purchases_total", "flashsale_draws_total"
    assert grew(before, after, purchases, strategy="db_atomic", outcome="confirmed") == 1
    assert grew(before, after, purchases, strategy="db_atomic", outcome="already_purchased") == 1
    assert grew(before, after, draws, strategy="db_pessimistic", outcome="confirmed") == 1
    assert grew(before, after, draws, strategy="db_pessimistic", outcome="draw_limit") == 1
    requests = "flashsale_http_requests_total"
    assert grew(before, after, requests, method="POST", route="vouchers/<int:voucher_id>/buy", status="200") == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reservations_redis")
def test_the_oldest_pending_reservation_ages_and_drift_is_counted_where_reconciliation_reports_it(
    api_client, make_voucher, reservations_redis
):
    voucher = make_voucher(stock=5, strategy="redis_lua")
    assert api_client().post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 202
    time.sleep(1.1)
    assert api_client().post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 202
    before = scrape()
    assert value(before, "flashsale_reservations_pending", kind="voucher") == 2
    assert value(before, "flashsale_reservations_oldest_pending_seconds", kind="voucher") >= 1.0

    reservations_client().add_units(group_id=voucher.group_id, stock_id=stock_row(voucher), units=3)  # drifted
    assert reservations_reconcile("voucher") == 1  # the beat's task, run here
    after = scrape()
    assert grew(before, after, "flashsale_reconcile_drift_total", kind="voucher") == 1
    assert grew(before, after, "flashsale_reconcile_drift_total", kind="pool") == 0
    assert reservations_client().waiting(group_id=voucher.group_id) == 2


@pytest.mark.django_db
def test_a_lock_acquired_waited_for_refused_and_released_shows_in_the_lock_metrics():
    client = locks_redis()
    before = scrape()
    clock = Clock()  # the holder's: its hold lasts what the test says, not what the scheduler gives
    holder = Lock(client, "stock-group:987654", lease=5, renew=False, clock=clock)
    assert holder.acquire()
    assert Lock(client, "stock-group:987654", blocking=False).acquire() is None  # busy
    waiter = Lock(client, "stock-group:987654", blocking_timeout=5)
    waiting = threading.Thread(target=waiter.acquire)
    waiting.start()
    wait_until(lambda: client.llen(holder.queue_key) == 1, "the waiter queues")
    clock.now += 0.05
    holder.release()  # handed over to the waiter
    waiting.join(5)
    assert not waiting.is_alive() and waiter.owned()
    waiter.release()
    lost = Lock(client, "reservations:987654", lease=0.2, renew=False)
    lost.acquire()
    wait_until(lambda: not client.exists(lost.key), "the lease expires in Redis")
    lost.release()  # the lease had expired: lost
    after = scrape()

    acquires = "flashsale_lock_acquires_total"
    assert grew(before, after, acquires, lock="stock-group:N", result="free") == 1
    assert grew(before, after, acquires, lock="stock-group:N", result="busy") == 1
    assert grew(before, after, acquires, lock="stock-group:N", result="waited") == 1
    assert grew(before, after, "flashsale_lock_hold_seconds_count", lock="stock-group:N") == 2
    assert grew(before, after, "flashsale_lock_hold_seconds_sum", lock="stock-group:N") >= 0.05
    assert grew(before, after, "flashsale_lock_wait_seconds_count", lock="stock-group:N") == 2
    assert grew(before, after, "flashsale_lock_lost_total", lock="reservations:N") == 1


@pytest.mark.django_db
def test_redis_lock_purchases_report_their_user_and_group_locks(api_client, make_voucher):
    voucher = make_voucher(stock=2, strategy="redis_lock")
    before = scrape()
    assert api_client().post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 201
    after = scrape()
    acquires = "flashsale_lock_acquires_total"
    assert grew(before, after, acquires, lock="voucher:N:user:N", result="free") == 1
    assert grew(before, after, acquires, lock="stock-group:N", result="free") == 1
    assert grew(before, after, "flashsale_purchases_total", strategy="redis_lock", outcome="confirmed") == 1


# -- who may read them -----------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "10.1.2.3", "172.20.0.5", "192.168.1.9", "::ffff:127.0.0.1"])
def test_without_a_token_loopback_and_private_addresses_may_read(settings, address):
    settings.METRICS_TOKEN = ""
    assert Client(REMOTE_ADDR=address).get("/metrics").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("address", ["203.0.113.7", "8.8.8.8", "2001:db8::1", "", "not-an-address"])
def test_without_a_token_any_other_address_is_refused(settings, address):
    settings.METRICS_TOKEN = ""
    response = Client(REMOTE_ADDR=address).get("/metrics")
    assert response.status_code == 403
    assert b"flashsale_" not in response.content


@pytest.mark.django_db
def test_a_request_that_came_through_a_proxy_is_refused_whatever_the_proxys_address(settings):
    """Behind nginx every request arrives from the proxy's private address."""
    settings.METRICS_TOKEN = ""
    assert (
        Client(REMOTE_ADDR="172.18.0.3").get("/metrics", headers={"X-Forwarded-For": "203.0.113.7"}).status_code == 403
    )
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics", headers={"Forwarded": "for=203.0.113.7"}).status_code == 403


@pytest.mark.django_db
def test_with_a_token_only_the_bearer_of_it_may_read_from_any_address(settings):
    settings.METRICS_TOKEN = "metrics-secret-5b1e0c"
    for address in ("127.0.0.1", "203.0.113.7"):
        refused = Client(REMOTE_ADDR=address).get("/metrics")
        assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")
        wrong = Client(REMOTE_ADDR=address).get("/metrics", headers={"Authorization": "Bearer metrics-secret-5b1e0d"})
        assert wrong.status_code == 401
        scrape(Client(REMOTE_ADDR=address), headers={"Authorization": "Bearer metrics-secret-5b1e0c"})


@pytest.mark.django_db
def test_metrics_switched_off_are_not_served(settings):
    settings.METRICS_ENABLED = False
    assert Client().get("/metrics").status_code == 404
    assert Client().post("/metrics").status_code in (404, 405)


@pytest.mark.django_db
def test_a_scrape_by_a_replicas_address_is_answered_before_the_host_check_and_the_https_redirect(settings):
    """Prometheus finds each web replica by its address and sends that as Host, over plain
    HTTP inside the private network."""
    settings.METRICS_TOKEN = ""
    settings.SECURE_SSL_REDIRECT = True
    replica = Client(REMOTE_ADDR="172.18.0.9", HTTP_HOST="172.18.0.5:8000")
    assert replica.get("/api/ping").status_code in (301, 400)  # anything else still checked
    samples = scrape(replica)
    assert value(samples, "flashsale_reservations_scrape_ok") == 1
    assert Client(REMOTE_ADDR="203.0.113.7", HTTP_HOST="172.18.0.5:8000").get("/metrics").status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize(
    "host", ["rebound.attacker.example", "rebound.attacker.example:8000", "localhost.attacker.example"]
)
def test_without_a_token_a_host_the_site_does_not_answer_is_refused(settings, host):
    """A page whose name was rebound to this server reads from inside the network, with
    its own name as Host: refused, as /healthz and every page refuse it."""
    settings.METRICS_TOKEN = ""
    refused = Client(REMOTE_ADDR="127.0.0.1", HTTP_HOST=host).get("/metrics")
    assert refused.status_code == 400 and b"flashsale_" not in refused.content
    for answered in ("localhost:8000", "127.0.0.1:8000", "[::1]:8000", "172.18.0.5"):
        assert Client(REMOTE_ADDR="127.0.0.1", HTTP_HOST=answered).get("/metrics").status_code == 200
