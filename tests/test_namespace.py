"""The instance namespace: every Redis key one instance writes starts with it, so that
instances with different databases share a Redis without sharing state; by default it is
derived from the database, so that every process of one instance agrees on it unasked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from celery import Celery
from django.core.cache import cache
from django.test import Client

from accounts.throttle import login_account, login_failure_record
from config.settings.base import database_from_url, database_namespace
from core.namespace import key_prefix
from locking.testing import RedisServer

from .http import post_json

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent


def namespace_of(url: str) -> str:
    return database_namespace(database_from_url(url))


def test_the_default_namespace_names_the_database(tmp_path, monkeypatch):
    assert namespace_of("mysql://root:@127.0.0.1:3306/shop") == namespace_of("mysql://app:secret@127.0.0.1:3306/shop")
    assert namespace_of("mysql://root:@127.0.0.1:3306/shop") != namespace_of("mysql://root:@127.0.0.1:3306/shop2")
    assert namespace_of("mysql://root:@127.0.0.1:3306/shop") != namespace_of("mysql://root:@127.0.0.1:3307/shop")
    assert namespace_of("mysql://root:@127.0.0.1:3306/shop") != namespace_of("mysql://root:@10.0.0.2:3306/shop")
    monkeypatch.chdir(tmp_path)  # one SQLite file, named relatively or absolutely
    assert namespace_of("sqlite:///db.sqlite3") == namespace_of(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert namespace_of("sqlite:///db.sqlite3") != namespace_of("sqlite:///other.sqlite3")


def settings_namespace(**env: str) -> subprocess.CompletedProcess:
    code = "from django.conf import settings; print(settings.INSTANCE_NAMESPACE)"
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.base", "PYTHONPATH": str(ROOT), **env},
    )  # fmt: skip


def test_the_namespace_is_configurable_and_checked():
    url = "mysql://root:@127.0.0.1:3306/shop"
    assert settings_namespace(DATABASE_URL=url, INSTANCE_NAMESPACE="").stdout.strip() == namespace_of(url)
    assert settings_namespace(DATABASE_URL=url, INSTANCE_NAMESPACE="shop-eu").stdout.strip() == "shop-eu"
    refused = settings_namespace(DATABASE_URL=url, INSTANCE_NAMESPACE="shop:{1}")
    assert refused.returncode != 0 and "INSTANCE_NAMESPACE must be" in refused.stderr


@pytest.fixture
def own_redis(settings, redlock_urls):
    """A Redis of the test's own, empty, for every role: locks, reservations, rate limits,
    the cache and the broker; Redlock's servers are the three of ``redlock_urls``."""
    server = RedisServer().start()
    settings.LOCK_REDIS_URL = settings.RESERVATIONS_REDIS_URL = server.url
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": server.url}}
    settings.RATE_LIMITS_ENABLED = True
    yield server.url, [redis.Redis.from_url(url) for url in (server.url, *redlock_urls)]
    server.close()


@pytest.mark.django_db(transaction=True)
def test_every_key_an_instance_writes_lies_under_its_namespace(own_redis, api_client, make_voucher, make_pool):
    """A sale under each Redis strategy (with the rate limits and redis_lua's persisting lock),
    a draw, a failed login, the cache and its lock, and tasks for both queues on the broker:
    nothing is left in Redis outside ``<namespace>:``."""
    url, clients = own_redis
    buyer = api_client()
    for strategy in ("redis_lua", "redis_lock", "redlock"):
        voucher = make_voucher(stock=3, strategy=strategy)
        assert buyer.post(f"/api/vouchers/{voucher.pk}/purchase").status_code in (201, 202)
    pool = make_pool(strategy="redis_lua", prizes=(("Gold", 2),))
    assert buyer.post(f"/api/pools/{pool.pk}/draw").status_code == 202
    # Read now too: the rate limits' counters live a second or two, which a loaded machine's
    # rest of the test may outlast.
    counted = {key.decode() for client in clients for key in client.scan_iter(count=1000)}
    login_failure_record(account=login_account("someone"), address="10.9.8.7")
    assert post_json(Client(), "/api/auth/login", {"username": "x", "password": "y"}).status_code == 401
    cache.set("greeting", "hello")
    with cache.lock("one-at-a-time", timeout=5):
        pass
    # The application's Celery settings (queues, routes, broker options) on this Redis.
    sender = Celery(set_as_current=False)
    sender.config_from_object("django.conf:settings", namespace="CELERY")
    sender.conf.broker_url = url
    with sender:
        sender.send_task("inventory.tasks.reservations_sweep", args=["voucher"])
        sender.send_task("lab.tasks.lab_run_task", args=[0])  # routed to the "lab" queue

    keys = sorted(counted | {key.decode() for client in clients for key in client.scan_iter(count=1000)})
    outside = [key for key in keys if not key.startswith(key_prefix())]
    assert not outside, outside
    inside = {key[len(key_prefix()) :].split(":", 1)[0] for key in keys}
    assert {"res", "rate", "lock", "login-failures", "cache", "celery", "lab"} <= inside, keys
