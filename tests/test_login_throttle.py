"""Login throttling: after a few failures an account, or an address, is refused before any
password is hashed, through the API (429 with Retry-After), the login page and the admin."""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from .http import post_json

pytestmark = pytest.mark.django_db

PASSWORD = "right-pass-2026"


@pytest.fixture
def throttled(settings):
    settings.RATE_LIMITS_ENABLED = True
    settings.LOGIN_FAILURES_PER_ACCOUNT = 5
    settings.LOGIN_FAILURES_PER_ADDRESS = 8
    client = redis.Redis.from_url(settings.LOCK_REDIS_URL)
    for key in client.scan_iter(match="login-failures:*"):
        client.delete(key)
    yield client
    for key in client.scan_iter(match="login-failures:*"):
        client.delete(key)


def api_login(username: str, password: str, address: str = "10.1.0.1"):
    return post_json(Client(REMOTE_ADDR=address), "/api/auth/login", {"username": username, "password": password})


def test_fifty_wrong_passwords_then_the_right_one_is_refused_until_the_window_ends(throttled, make_user):
    make_user("victim", password=PASSWORD)
    answers = [api_login("victim", f"guess-{n}", address=f"10.1.1.{n}").status_code for n in range(50)]
    assert answers[:5] == [401] * 5 and set(answers[5:]) == {429}
    refused = api_login("victim", PASSWORD, address="10.1.2.1")
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert 800 < int(refused["Retry-After"]) <= 900  # the rest of the 15-minute window
    throttled.delete("login-failures:account:victim")  # the window ended
    assert api_login("victim", PASSWORD, address="10.1.2.1").status_code == 200


def test_an_address_guessing_many_accounts_is_refused(throttled, make_user):
    make_user("carol", password=PASSWORD)
    for n in range(8):
        assert api_login(f"nobody-{n}", "guess").status_code == 401
    assert api_login("carol", PASSWORD).status_code == 429  # the same address
    assert api_login("carol", PASSWORD, address="10.1.0.2").status_code == 200


def test_no_password_is_hashed_once_throttled(throttled, make_user, monkeypatch):
    from django.contrib.auth.backends import ModelBackend

    make_user("dave", password=PASSWORD)
    for _ in range(5):
        api_login("dave", "guess")
    hashed = []
    original = ModelBackend.authenticate
    monkeypatch.setattr(ModelBackend, "authenticate", lambda *a, **k: hashed.append(1) or original(*a, **k))
    assert api_login("dave", PASSWORD).status_code == 429
    assert hashed == []


def test_the_login_page_and_the_admin_are_throttled_too(throttled, make_user):
    make_user("erin", password=PASSWORD, staff=True)
    page = Client(REMOTE_ADDR="10.1.3.1")
    for _ in range(5):
        page.post("/login/", {"username": "erin", "password": "guess"})
    answer = page.post("/login/", {"username": "erin", "password": PASSWORD})
    assert answer.status_code == 200 and "_auth_user_id" not in page.session  # the form again, not logged in
    admin = Client(REMOTE_ADDR="10.1.3.2")
    answer = admin.post("/admin/login/", {"username": "erin", "password": PASSWORD})
    assert answer.status_code == 200 and "_auth_user_id" not in admin.session


def test_switched_off_nothing_is_counted(throttled, settings, make_user):
    settings.RATE_LIMITS_ENABLED = False
    make_user("fay", password=PASSWORD)
    for _ in range(10):
        api_login("fay", "guess")
    assert api_login("fay", PASSWORD).status_code == 200
