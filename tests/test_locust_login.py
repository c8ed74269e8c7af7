"""The compose stack's Locust web UI asks for a login (``--web-login`` with
``loadtests/web_login.py``): a real Locust master, as the compose file starts it."""

from __future__ import annotations

import http.cookiejar
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from loadtests import login_throttle
from loadtests.login_throttle import LoginThrottle
from locking.testing import free_port

pytestmark = pytest.mark.load

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct-horse-battery-staple"


def compose_master_command() -> list[str]:
    """The master's command in docker-compose.yml, for a local run on a free port."""
    command = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["locust-master"]["command"]
    return [part.replace("http://nginx", "http://127.0.0.1:1") for part in command]


@contextmanager
def locust_master(env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen]]:
    port = free_port()
    master = subprocess.Popen(
        [sys.executable, "-m", "locust", *compose_master_command(), "--web-host", "127.0.0.1", "--web-port", str(port)],
        cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}", master
    finally:
        master.terminate()
        master.wait(30)


def wait_answering(base: str, master: subprocess.Popen) -> None:
    give_up = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{base}/login", timeout=2).close()
            return
        except OSError:
            assert master.poll() is None, master.stdout.read()
            assert time.monotonic() < give_up, "the Locust master did not start"
            time.sleep(0.2)


def test_the_locust_ui_asks_for_a_login_and_takes_only_the_right_one():
    env = {**os.environ, "LOCUST_WEB_PASSWORD": PASSWORD}
    with locust_master(env) as (base, master):
        wait_answering(base, master)
        jar = http.cookiejar.CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        for page in ("/", "/stats/requests"):
            landed = browser.open(f"{base}{page}", timeout=10)
            assert urllib.parse.urlsplit(landed.url).path == "/login", page  # sent to the login
        swarm = urllib.parse.urlencode({"user_count": 1, "spawn_rate": 1}).encode()
        assert urllib.parse.urlsplit(browser.open(f"{base}/swarm", data=swarm).url).path == "/login"  # no run
        form = urllib.parse.urlencode({"username": "locust", "password": "wrong-" + PASSWORD}).encode()
        assert urllib.parse.urlsplit(browser.open(f"{base}/login_submit", data=form).url).path == "/login"
        assert urllib.parse.urlsplit(browser.open(f"{base}/stats/requests").url).path == "/login"
        form = urllib.parse.urlencode({"username": "locust", "password": PASSWORD}).encode()
        assert urllib.parse.urlsplit(browser.open(f"{base}/login_submit", data=form).url).path == "/"
        stats = browser.open(f"{base}/stats/requests")
        assert urllib.parse.urlsplit(stats.url).path == "/stats/requests" and b"stats" in stats.read()


def test_the_locust_master_refuses_to_start_without_a_password():
    env = {k: v for k, v in os.environ.items() if k != "LOCUST_WEB_PASSWORD"}
    with locust_master(env) as (_, master):
        out, _ = master.communicate(timeout=60)
        assert master.returncode != 0
        assert "LOCUST_WEB_PASSWORD must be set" in out


def test_many_wrong_guesses_at_the_locust_login_are_refused_before_the_password_is_compared():
    """200 guesses once took 3.6 s, each compared: after the free failures an address is
    refused (429, Retry-After), the right password too, until its backoff ends."""
    env = {**os.environ, "LOCUST_WEB_PASSWORD": PASSWORD}
    with locust_master(env) as (base, master):
        wait_answering(base, master)
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

        def submit(password: str) -> tuple[int, str, str | None]:
            form = urllib.parse.urlencode({"username": "locust", "password": password}).encode()
            try:
                landed = browser.open(f"{base}/login_submit", data=form, timeout=10)
            except urllib.error.HTTPError as refused:
                return refused.code, "", refused.headers.get("Retry-After")
            return landed.status, urllib.parse.urlsplit(landed.url).path, None

        answers = [submit(f"guess-{n}") for n in range(200)]
        assert answers[: login_throttle.FREE] == [(200, "/login", None)] * login_throttle.FREE
        refused = answers[login_throttle.FREE :]
        assert {(code, retry_after) for code, _, retry_after in refused} == {(429, str(int(login_throttle.BACKOFF)))}
        assert submit(PASSWORD)[0] == 429  # backed off: not even compared


def test_the_throttle_backs_off_per_address_and_ends_guesses_spread_over_many():
    now = [1_000.0]
    throttle = LoginThrottle(clock=lambda: now[0])
    for _ in range(login_throttle.FREE - 1):
        throttle.failure("10.0.0.1")
        assert throttle.retry_after("10.0.0.1") == 0
    throttle.failure("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") == 30 and throttle.retry_after("10.0.0.2") == 0
    now[0] += 30
    assert throttle.retry_after("10.0.0.1") == 0
    throttle.failure("10.0.0.1")  # each further failure doubles the wait
    assert throttle.retry_after("10.0.0.1") == 60
    # The operator logs in from an address of theirs, which forgets its failures.
    throttle.success("10.0.0.9")
    # Guesses spread over many addresses, a few each, still end, but not where the operator logs in.
    for n in range(login_throttle.ACCOUNT_CEILING):
        throttle.failure(f"192.0.2.{n}")
    assert throttle.retry_after("198.51.100.1") > 0
    assert throttle.retry_after("10.0.0.9") == 0
    now[0] += login_throttle.WINDOW
    assert throttle.retry_after("198.51.100.1") == 0 and throttle.retry_after("10.0.0.1") == 0


def test_a_success_forgets_the_addresss_failures_and_the_throttle_remembers_a_bounded_number(monkeypatch):
    throttle = LoginThrottle(clock=lambda: 5.0)
    for _ in range(login_throttle.FREE):
        throttle.failure("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") > 0
    throttle.success("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") == 0
    monkeypatch.setattr(login_throttle, "ADDRESSES", 3)
    for n in range(10):
        throttle.failure(f"10.1.0.{n}")
    assert list(throttle.by_address) == ["10.1.0.7", "10.1.0.8", "10.1.0.9"]
