"""Login throttling (accounts.throttle): an account is backed off from the address that
fails it, with a wait that doubles; an account from anywhere and an address for any
account meet higher ceilings. Refused before any password is hashed, through the API (429
with Retry-After), the login page and the admin; on whatever RATE_LIMITS_ENABLED says."""

from __future__ import annotations

import time

import pytest
import redis
from django.test import Client

from accounts import throttle
from core.namespace import instance_key
from tests.clocks import Clock

from .http import post_json

pytestmark = pytest.mark.django_db

PASSWORD = "right-pass-2026"


@pytest.fixture
def clock(monkeypatch):
    moved = Clock(time.time())
    monkeypatch.setattr(throttle, "clock", moved)
    return moved


@pytest.fixture
def throttled(settings, clock):
    settings.LOGIN_FAILURES_PER_ACCOUNT_AND_ADDRESS = 5
    settings.LOGIN_BACKOFF_SECONDS = 30
    settings.LOGIN_FAILURES_PER_ACCOUNT = 20
    settings.LOGIN_FAILURES_PER_ADDRESS = 8
    settings.LOGIN_FAILURE_WINDOW_SECONDS = 900
    settings.LOGIN_KNOWN_ADDRESSES = 3
    settings.LOGIN_KNOWN_ADDRESS_SECONDS = 30 * 24 * 3600
    client = redis.Redis.from_url(settings.LOCK_REDIS_URL)
    for key in client.scan_iter(match=instance_key("login-failures:*")):
        client.delete(key)
    yield client
    for key in client.scan_iter(match=instance_key("login-failures:*")):
        client.delete(key)


def api_login(username: str, password: str, address: str = "10.1.0.1"):
    return post_json(Client(REMOTE_ADDR=address), "/api/auth/login", {"username": username, "password": password})


def test_wrong_passwords_back_the_account_off_from_that_address_only(throttled, make_user):
    make_user("victim", password=PASSWORD)
    assert [api_login("victim", f"guess-{n}").status_code for n in range(5)] == [401] * 5
    refused = api_login("victim", PASSWORD)
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert int(refused["Retry-After"]) == 30
    # The owner, from anywhere else, is not locked out by the guesser.
    assert api_login("victim", PASSWORD, address="10.1.0.2").status_code == 200


def test_the_backoff_doubles_with_each_further_failure_and_a_success_forgets_it(throttled, clock, make_user):
    make_user("victim", password=PASSWORD)
    for n in range(5):
        api_login("victim", f"guess-{n}")
    assert int(api_login("victim", "guess")["Retry-After"]) == 30
    clock.now += 31
    assert api_login("victim", "guess-6").status_code == 401  # heard again, and wrong
    assert int(api_login("victim", PASSWORD)["Retry-After"]) == 60
    clock.now += 59
    assert api_login("victim", PASSWORD).status_code == 429
    clock.now += 2
    assert api_login("victim", PASSWORD).status_code == 200
    assert api_login("victim", "typo").status_code == 401  # forgotten: four more before a wait
    assert api_login("victim", PASSWORD).status_code == 200


def test_every_spelling_the_database_takes_for_the_name_counts_as_one_account(throttled, make_user):
    """Case, trailing spaces and accents, which MariaDB's collation ignores when the login
    looks the user up: each spelling tries the one account's password, and counts against it."""
    make_user("victim", password=PASSWORD)
    for variant in ("Victim", "VICTIM", "víctim", "victim ", "ViCtÎm  "):
        assert api_login(variant, "guess").status_code == 401
    assert api_login("victim", PASSWORD).status_code == 429
    assert api_login("VÍCTIM ", PASSWORD).status_code == 429


def test_a_name_no_user_has_is_counted_under_the_name_as_the_database_compares_names(throttled):
    variants = ("Nobody", "NOBODY", "nobody ", "nöbody")
    for variant in variants:
        assert api_login(variant, "guess", address="10.1.0.9").status_code == 401
    assert len({throttle.login_account(variant) for variant in variants}) == 1
    counted = throttle.login_throttle_key("account", throttle.login_account("nobody"))
    assert throttled.get(counted) == b"4"
    assert throttle.login_account("somebody") != throttle.login_account("nobody")


@pytest.mark.parametrize("exists", [True, False])
def test_a_names_spelling_refused_after_its_failures_does_not_tell_whether_the_user_exists(
    throttled, make_user, exists
):
    """Five failures as ``bob`` back the name off from that address; ``böb``, which the
    database takes for the same name, is then refused alike whether or not bob exists (it
    answered 401 after a hash where nobody was called bob, and 429 at once where somebody was)."""
    if exists:
        make_user("bob", password=PASSWORD)
    assert [api_login("bob", f"guess-{n}", address="10.1.0.7").status_code for n in range(5)] == [401] * 5
    assert api_login("böb", "guess", address="10.1.0.7").status_code == 429


def test_an_account_guessed_from_many_addresses_meets_its_ceiling_everywhere(throttled, make_user):
    make_user("victim", password=PASSWORD)
    answers = [api_login("victim", f"guess-{n}", address=f"10.1.1.{n}").status_code for n in range(25)]
    assert answers[:20] == [401] * 20 and set(answers[20:]) == {429}
    refused = api_login("victim", PASSWORD, address="10.1.2.1")
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert 800 < int(refused["Retry-After"]) <= 900  # the rest of the 15-minute window
    throttled.delete(throttle.login_throttle_key("account", throttle.login_account("victim")))  # the window ended
    assert api_login("victim", PASSWORD, address="10.1.2.1").status_code == 200


def guess_from_many_addresses(username: str) -> list[int]:
    """Three wrong passwords from each of ten addresses: over the account's ceiling (20),
    under each address's own (5 for the account, 8 for any)."""
    return [api_login(username, f"guess-{n}", address=f"10.1.1.{n % 10}").status_code for n in range(30)]


def test_guesses_from_elsewhere_do_not_lock_the_owner_out_of_an_address_it_logged_in_from(throttled, make_user):
    make_user("victim", password=PASSWORD)
    assert api_login("victim", PASSWORD, address="10.1.5.1").status_code == 200
    answers = guess_from_many_addresses("victim")
    assert answers[:20] == [401] * 20 and set(answers[20:]) == {429}
    assert api_login("victim", PASSWORD, address="10.1.2.1").status_code == 429  # a stranger
    assert api_login("Victim ", PASSWORD, address="10.1.5.1").status_code == 200
    # The owner's address keeps its own budget: guessing from it still backs it off.
    assert [api_login("victim", f"typo-{n}", address="10.1.5.1").status_code for n in range(6)] == [401] * 5 + [429]


def test_only_the_most_recent_addresses_are_remembered_and_only_for_a_while(throttled, settings, clock, make_user):
    make_user("victim", password=PASSWORD)
    for n in range(4):  # one more than LOGIN_KNOWN_ADDRESSES
        assert api_login("victim", PASSWORD, address=f"10.1.6.{n}").status_code == 200
        clock.now += 1
    known = throttle.login_throttle_key("known", throttle.login_account("victim"))
    assert throttled.zcard(known) == 3
    assert 0 < throttled.pttl(known) <= settings.LOGIN_KNOWN_ADDRESS_SECONDS * 1000
    guess_from_many_addresses("victim")
    assert api_login("victim", PASSWORD, address="10.1.6.0").status_code == 429  # the oldest, forgotten
    assert api_login("victim", PASSWORD, address="10.1.6.1").status_code == 200
    clock.now += settings.LOGIN_KNOWN_ADDRESS_SECONDS
    assert api_login("victim", PASSWORD, address="10.1.6.3").status_code == 429  # unused too long


def test_an_address_guessing_many_accounts_is_refused(throttled, make_user):
    make_user("carol", password=PASSWORD)
    for n in range(8):
        assert api_login(f"nobody-{n}", "guess").status_code == 401
    assert api_login("carol", PASSWORD).status_code == 429  # the same address
    assert api_login("carol", PASSWORD, address="10.1.0.2").status_code == 200


def test_the_addresses_of_one_ipv6_64_guess_as_one_address(throttled, make_user):
    """A host picks its own IPv6 address within its /64 at will: each of them guessing on a
    budget of its own, the address's ceiling never came."""
    make_user("carol", password=PASSWORD)
    for n in range(8):
        assert api_login(f"nobody-{n}", "guess", address=f"2001:db8:1:2::{n + 1:x}").status_code == 401
    assert api_login("carol", PASSWORD, address="2001:db8:1:2:ffff::9").status_code == 429  # the same /64
    assert api_login("carol", PASSWORD, address="2001:db8:1:3::1").status_code == 200  # the next /64


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
    admin = Client(REMOTE_ADDR="10.1.3.1")
    answer = admin.post("/admin/login/", {"username": "erin", "password": PASSWORD})
    assert answer.status_code == 200 and "_auth_user_id" not in admin.session


def test_the_throttle_holds_with_the_crowds_limits_off(throttled, settings, make_user):
    """make run, the load tests and the suite switch the crowd's limits off; not this."""
    settings.RATE_LIMITS_ENABLED = False
    make_user("fay", password=PASSWORD)
    assert [api_login("fay", f"guess-{n}").status_code for n in range(50)] == [401] * 5 + [429] * 45
    assert api_login("fay", PASSWORD).status_code == 429
