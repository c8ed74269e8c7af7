"""The compose stack's Locust web UI asks for a login (``--web-login`` with
``loadtests/web_login.py``): a real Locust master, as the compose file starts it."""

from __future__ import annotations

import http.cookiejar
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from locking.testing import free_port

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
