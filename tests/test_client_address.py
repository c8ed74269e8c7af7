"""The client's address (``core.ratelimit.client_address``): behind a trusted proxy, the one
that proxy forwarded for; the header from anyone else, straight to gunicorn, is ignored.

Through a real proxy process (``tests/proxy.py``, which replaces ``X-Forwarded-For`` as
``deploy/nginx.conf`` does) in front of a real gunicorn, every client connecting from an
address of its own (the whole of 127.0.0.0/8 is this machine)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.test import RequestFactory

from core.namespace import instance_key
from core.ratelimit import client_address, client_counted
from locking.testing import free_port

from .live import database_url, running_gunicorn

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "right-pass-2026"


@pytest.mark.parametrize(
    ("peer", "forwarded", "expected"),
    [
        ("203.0.113.9", "", "203.0.113.9"),  # no proxy
        ("203.0.113.9", "198.51.100.1", "203.0.113.9"),  # not a trusted proxy: ignored
        ("10.0.0.2", "", "10.0.0.2"),  # the proxy itself, saying nothing
        ("10.0.0.2", "198.51.100.1", "198.51.100.1"),
        ("10.0.0.2", "6.6.6.6, 198.51.100.1", "198.51.100.1"),  # what the client wrote is never believed
        ("10.0.0.2", "6.6.6.6, 198.51.100.1, 10.0.0.7", "198.51.100.1"),  # two proxies in a row
        ("10.0.0.2", "6.6.6.6, not-an-address", "10.0.0.2"),
        ("10.0.0.2", "::ffff:198.51.100.1", "198.51.100.1"),
        ("::ffff:203.0.113.9", "", "203.0.113.9"),
        # With the port some proxies add: read as no address, everyone behind was the proxy.
        ("10.0.0.2", "198.51.100.1:5123", "198.51.100.1"),
        ("10.0.0.2", "[2001:db8::1]:5123", "2001:db8::1"),
        ("10.0.0.2", "6.6.6.6, 198.51.100.1:5123, 10.0.0.7:80", "198.51.100.1"),
    ],
)
def test_the_address_is_the_peers_unless_a_trusted_proxy_forwarded_for_another(settings, peer, forwarded, expected):
    settings.TRUSTED_PROXIES = ["10.0.0.0/24"]
    meta = {"REMOTE_ADDR": peer} | ({"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {})
    assert client_address(RequestFactory().get("/", **meta)) == expected


@pytest.mark.parametrize(
    ("peer", "counted"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2:abcd:ef01:2345:6789", "2001:db8:1:2::/64"),
        ("::1", "::/64"),
    ],
)
def test_the_rate_limits_count_an_ipv6_client_by_its_64(settings, peer, counted):
    settings.TRUSTED_PROXIES = []
    assert client_counted(RequestFactory().get("/", REMOTE_ADDR=peer)) == counted


@pytest.mark.parametrize(("peer", "believed"), [("10.0.0.2", True), ("203.0.113.9", False)])
def test_the_scheme_a_request_names_is_believed_from_a_trusted_proxy_only(settings, peer, believed):
    from core.proxied import ProxiedSchemeMiddleware

    settings.TRUSTED_PROXIES = ["10.0.0.0/24"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")  # as production has it
    request = RequestFactory().get("/", REMOTE_ADDR=peer, HTTP_X_FORWARDED_PROTO="https")
    assert ProxiedSchemeMiddleware(lambda seen: seen.is_secure())(request) is believed


def test_without_trusted_proxies_every_header_is_ignored(settings):
    settings.TRUSTED_PROXIES = []
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="198.51.100.1")
    assert client_address(request) == "10.0.0.2"


def test_the_compose_proxy_replaces_the_header_and_the_web_trusts_it():
    import yaml

    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in conf
    assert "$proxy_add_x_forwarded_for" not in conf  # that would keep what the client wrote
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["x-app"]["environment"]["TRUSTED_PROXIES"]


@pytest.fixture
def behind_proxy(transactional_db, django_user_model) -> Iterator[tuple[str, str]]:
    """(the proxy's URL, gunicorn's URL): gunicorn trusting 127.0.0.1, where the proxy
    connects from, with a throttle of 4 failures per address and nothing else near."""
    hasher = PBKDF2PasswordHasher()
    django_user_model.objects.create(
        username="victim", password=hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
    )
    lock = redis.Redis.from_url(settings.LOCK_REDIS_URL)
    for key in lock.scan_iter(match=instance_key("login-failures:*")):
        lock.delete(key)
    env = {
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "TRUSTED_PROXIES": "127.0.0.1",
        "LOGIN_FAILURES_PER_ADDRESS": "4",
        "LOGIN_FAILURES_PER_ACCOUNT_AND_ADDRESS": "100",
        "LOGIN_FAILURES_PER_ACCOUNT": "100",
    }
    with running_gunicorn(env) as upstream:
        port = free_port()
        proxy = subprocess.Popen(
            [sys.executable, "-m", "tests.proxy", str(port), upstream], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        try:
            assert proxy.stdout.readline().strip() == "ready"
            yield f"http://127.0.0.1:{port}", upstream
        finally:
            proxy.terminate()
            proxy.wait(10)
    for key in lock.scan_iter(match=instance_key("login-failures:*")):
        lock.delete(key)


def login(url: str, username: str, password: str, *, source: str, forwarded_for: str | None = None) -> int:
    """POST /api/auth/login to ``url`` from the local address ``source``."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30, source_address=(source, 0))
    headers = {"Content-Type": "application/json"}
    if forwarded_for is not None:
        headers["X-Forwarded-For"] = forwarded_for
    try:
        connection.request(
            "POST", "/api/auth/login", body=json.dumps({"username": username, "password": password}), headers=headers
        )
        return connection.getresponse().status
    finally:
        connection.close()


def test_behind_the_proxy_each_client_is_counted_under_its_own_address(behind_proxy):
    proxy, _ = behind_proxy
    # A guesser, claiming another address each time: the proxy says where it really is.
    for n in range(4):
        assert login(proxy, f"nobody-{n}", "guess", source="127.0.0.2", forwarded_for=f"10.9.9.{n}") == 401
    assert login(proxy, "victim", PASSWORD, source="127.0.0.2", forwarded_for="10.9.9.99") == 429
    # Everyone else behind the same proxy is not locked out with it.
    assert login(proxy, "victim", PASSWORD, source="127.0.0.3") == 200


def test_a_header_sent_straight_to_gunicorn_is_ignored(behind_proxy):
    proxy, upstream = behind_proxy
    # Straight to gunicorn, claiming to be 127.0.0.5: counted as itself.
    for n in range(4):
        assert login(upstream, f"nobody-{n}", "guess", source="127.0.0.4", forwarded_for="127.0.0.5") == 401
    assert login(upstream, "victim", PASSWORD, source="127.0.0.4", forwarded_for="127.0.0.5") == 429
    assert login(proxy, "victim", PASSWORD, source="127.0.0.5") == 200
