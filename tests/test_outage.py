"""A dependency out of reach answers 503 ``unavailable`` with Retry-After, fast, and
``/healthz`` names it: a real Redis server stopped under the app, and real connection
errors from the database's client (``core.outage``)."""

from __future__ import annotations

import time

import MySQLdb
import pytest
import redis
from django.db import OperationalError, connection
from django.test import Client

from core.outage import dependency_down
from locking.testing import RedisServer, free_port
from orders.models import Order

pytestmark = [pytest.mark.django_db, pytest.mark.live]


@pytest.fixture
def stopped_redis():
    """A Redis server that ran and was stopped: its port refuses connections."""
    server = RedisServer().start()
    server.stop()
    yield server
    server.close()


@pytest.mark.parametrize("strategy", ["redis_lock", "redis_lua"])
def test_a_purchase_whose_redis_is_down_is_a_503_with_retry_after_within_seconds(
    strategy, stopped_redis, settings, make_voucher, api_client
):
    voucher = make_voucher(strategy="db_atomic")
    settings.LOCK_REDIS_URL = settings.RESERVATIONS_REDIS_URL = stopped_redis.url
    voucher.strategy = strategy
    voucher.save(update_fields=["strategy"])
    client = api_client()

    started = time.monotonic()
    response = client.post(f"/api/vouchers/{voucher.pk}/purchase")

    assert time.monotonic() - started < 5
    assert response.status_code == 503, response.content
    assert response.json()["code"] == "unavailable"
    assert int(response["Retry-After"]) > 0
    assert not Order.objects.filter(voucher=voucher).exists()


def test_a_lock_strategy_sells_again_once_its_redis_is_back(stopped_redis, settings, make_voucher, api_client):
    settings.LOCK_REDIS_URL = stopped_redis.url
    voucher = make_voucher(strategy="redis_lock")
    client = api_client()
    assert client.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 503

    stopped_redis.start()

    assert client.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 201


def test_healthz_names_the_lock_redis_when_it_is_down(stopped_redis, settings):
    settings.LOCK_REDIS_URL = stopped_redis.url

    started = time.monotonic()
    response = Client().get("/healthz")

    assert time.monotonic() - started < 5
    assert response.status_code == 503
    body = response.json()
    assert body["locks"].startswith("error")
    assert (body["database"], body["redis"], body["status"]) == ("ok", "ok", "unavailable")


def test_a_database_that_refuses_connections_is_a_dependency_down():
    with pytest.raises(OperationalError) as refused, connection.wrap_database_errors:
        MySQLdb.connect(host="127.0.0.1", port=free_port(), user="root", connect_timeout=2)
    assert dependency_down(refused.value) == "database"


def test_a_redis_that_refuses_connections_is_a_dependency_down(stopped_redis):
    with pytest.raises(redis.ConnectionError) as refused:
        redis.Redis.from_url(stopped_redis.url, retry=None).ping()
    assert dependency_down(refused.value) == "redis"
    # Also when raised from under a domain's own error.
    try:
        try:
            raise refused.value
        except redis.ConnectionError as exc:
            raise RuntimeError("could not take stock") from exc
    except RuntimeError as wrapped:
        assert dependency_down(wrapped) == "redis"


def test_a_deadlock_is_not_a_dependency_down():
    # MySQL's 1213: the request's own business, a 500 that is logged, not a 503.
    assert dependency_down(OperationalError(1213, "Deadlock found when trying to get lock")) is None
    assert dependency_down(RuntimeError("a bug")) is None


def test_a_redlock_purchase_sells_with_one_server_of_three_down_and_answers_503_with_two(
    redlock_urls, redlock_servers, make_voucher, api_client
):
    voucher = make_voucher(strategy="redlock")
    purchase = f"/api/vouchers/{voucher.pk}/purchase"
    redlock_servers[0].stop()
    assert api_client().post(purchase).status_code == 201  # a majority still answers

    redlock_servers[1].stop()
    started = time.monotonic()
    response = api_client().post(purchase)

    # Not 409 busy: no other buyer holds the lock, its servers are out of reach.
    assert time.monotonic() - started < 5
    assert response.status_code == 503, response.content
    assert response.json()["code"] == "unavailable"
    assert int(response["Retry-After"]) > 0
    assert Order.objects.filter(voucher=voucher).count() == 1

    redlock_servers[0].start()
    redlock_servers[1].start()  # both empty: their fence counters start again from 0
    assert api_client().post(purchase).status_code == 201


@pytest.fixture
def logged_in(make_user):
    """A browser's client, logged in; a server error is answered, not raised."""
    client = Client(raise_request_exception=False)
    client.force_login(make_user("ann"))
    return client


def assert_503_page(response, service: str) -> None:
    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert 'data-testid="error-503"' in page
    assert f"({service})" in page
    assert "/static/css/site.css" in page and 'href="/">Back to the sales</a>' in page


def test_a_page_whose_redis_is_down_is_the_503_page_with_retry_after(stopped_redis, settings, make_voucher, logged_in):
    voucher = make_voucher(strategy="redis_lock")
    settings.LOCK_REDIS_URL = stopped_redis.url

    started = time.monotonic()
    response = logged_in.post(f"/vouchers/{voucher.pk}/buy")

    assert time.monotonic() - started < 5
    assert_503_page(response, "Redis")
    assert not Order.objects.filter(voucher=voucher).exists()


@pytest.fixture
def database_down():
    """The database's address swapped for a port nobody listens on: every query from now
    on fails as it does when the server is down (2003, cannot connect)."""
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))
    yield
    connection.close()
    connection.settings_dict.update(saved)


@pytest.mark.django_db(transaction=True)
def test_a_page_whose_database_is_down_is_the_503_page_within_seconds(make_voucher, database_down):
    started = time.monotonic()
    response = Client(raise_request_exception=False).get("/")

    assert time.monotonic() - started < 5
    assert_503_page(response, "the database")


def test_a_page_that_fails_for_another_reason_is_still_the_500_page(settings):
    # Only a dependency out of reach is a 503; a bug stays a logged 500
    # (tests/test_error_pages.py renders it).
    from django.test import RequestFactory

    from core.outage import server_error

    try:
        raise OperationalError(1213, "Deadlock found when trying to get lock")
    except OperationalError:
        response = server_error(RequestFactory().get("/"))
    assert response.status_code == 500
