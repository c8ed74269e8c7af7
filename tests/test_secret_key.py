"""No key known outside the machine signs anything: the settings have no key of their own,
``make run`` makes one per checkout (``var/secret_key``, mode 0600) for every process it
starts, and a ``manage.py`` command run by hand beside it signs with the same one."""

from __future__ import annotations

import os
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.core import signing

from core.local_key import local_key_ensure, local_key_provide, local_key_read

from .test_serve import BROKER, drop, server_url, started_by

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
# The key the base settings fell back on, published in the repository's history.
PUBLISHED_KEY = "insecure-local-only-key-set-DJANGO_SECRET_KEY"


def by_hand(*args: str, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    """``python manage.py ...`` as a person types it beside a running ``make run``."""
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=check
    )


def shell_env(**extra: str) -> dict[str, str]:
    """A shell's environment: no DJANGO_SECRET_KEY (the suite's own is dropped), nor the suite's
    INSTANCE_NAMESPACE (what it starts derives its own from its database, as make run does,
    rather than sweep this process's keys in the same Redis), base settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "INSTANCE_NAMESPACE")}
    return {**env, "DJANGO_SETTINGS_MODULE": "config.settings.base", **extra}


def status(url: str, token: str) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as refused:
        return refused.code


def test_the_base_settings_refuse_to_start_without_a_key(tmp_path):
    result = by_hand("check", env=shell_env(VAR_DIR=str(tmp_path)), check=False)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY is not set" in result.stderr and "make run" in result.stderr


def test_the_checkouts_key_is_made_once_random_and_readable_by_its_owner_only(tmp_path):
    first = local_key_ensure(tmp_path)
    assert len(first) >= 50 and first != PUBLISHED_KEY
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600
    assert local_key_ensure(tmp_path) == first == local_key_read(tmp_path)  # kept, not made again
    assert local_key_ensure(tmp_path / "other") != first  # another checkout, another key
    env = {"VAR_DIR": str(tmp_path)}
    assert local_key_provide(env) == first == env["DJANGO_SECRET_KEY"]
    given = {"VAR_DIR": str(tmp_path), "DJANGO_SECRET_KEY": "x" * 60}
    assert local_key_provide(given) == "x" * 60  # the environment's wins


@pytest.fixture
def serve_database():
    name = f"{settings.DATABASES['default']['NAME']}_serve_key"[:64]
    drop(name)
    yield name
    drop(name)


def test_a_token_signed_with_the_published_key_is_refused_on_a_make_run_server(serve_database, tmp_path):
    """``make run`` from a shell that sets no key: the old published key signs nothing there,
    and a token issued by a manage.py command run by hand beside it works there."""
    from locking.testing import free_port

    redis.Redis.from_url(BROKER).flushdb()
    port = free_port()
    env = shell_env(
        VAR_DIR=str(tmp_path),
        DATABASE_URL=server_url(serve_database),
        REDIS_URL=settings.REDIS_URL,
        CELERY_BROKER_URL=BROKER,
        PORT=str(port),
    )
    env.pop("LOCK_REDIS_URLS", None)
    server = subprocess.Popen(
        [sys.executable, "scripts/serve.py"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    serving = threading.Event()

    def read() -> None:
        for line in server.stdout:
            lines.append(line)
            if "[run] Serving on" in line:
                serving.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert serving.wait(180), "".join(lines)
        base = f"http://127.0.0.1:{port}"
        give_up = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=3):
                    break
            except OSError:
                assert time.monotonic() < give_up, "".join(lines)
                time.sleep(0.3)
        # A token issued by hand, in a shell without the key, signs with the checkout's.
        tokens = tmp_path / "tokens.txt"
        by_hand("issue_tokens", "--count", "1", "--out", str(tokens), "--prefix", "keyed", env=env)
        issued = tokens.read_text().split()[1]
        assert status(f"{base}/api/orders", issued) == 200

        # The forgery of the probe: the same user, the end of time, the published key.
        user_id = issued.split(".")[0]
        forged = signing.Signer(key=PUBLISHED_KEY, salt="accounts.tokens", algorithm="sha256").sign(
            f"{user_id}.253402300799.1.{secrets.token_urlsafe(16)}"
        )
        assert status(f"{base}/api/orders", forged) == 401
        assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        for left in started_by(port):
            os.kill(left, signal.SIGKILL)
