"""A live server for tests that drive the application over HTTP as a client would: gunicorn
with ``config/gunicorn.py`` on a free port, on the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from django.db import connection

from core.namespace import instance_key
from locking.testing import free_port

ROOT = Path(__file__).resolve().parent.parent


def database_url() -> str:
    """The test database, as a server started beside the test reaches it."""
    config = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{config['NAME']}"
    host, port = config["HOST"] or "127.0.0.1", config["PORT"] or 3306
    return f"mysql://{config['USER']}:{config['PASSWORD']}@{host}:{port}/{config['NAME']}"


def instance_keys_emptied(url: str) -> None:
    """Delete this instance's keys (``core.namespace``) from a Redis database (a broker's, the
    reservations') that other test workers and test runs of other checkouts share at the same
    time, each under its own namespace: a flush of the whole database would take their queued
    tasks, their workers' acknowledgements and their items' states."""
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=instance_key("*"), count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@contextmanager
def running_gunicorn(env: dict[str, str], *, workers: int = 2, log: Path | None = None) -> Iterator[str]:
    """gunicorn serving ``config.wsgi`` in ``env`` (added to this process's environment) on a
    free port of 127.0.0.1; yields its base URL once ``/api/ping`` answers, and stops it (its
    whole process group) on the way out."""
    port = free_port()
    output = open(log, "ab") if log is not None else None  # noqa: SIM115
    gunicorn = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--config", str(ROOT / "config" / "gunicorn.py"), "config.wsgi",
         "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--log-level", "warning"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **env}, start_new_session=True,
        stdout=output, stderr=output,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        give_up = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/ping", timeout=5):
                    break
            except OSError:
                assert gunicorn.poll() is None and time.monotonic() < give_up, "gunicorn did not start"
                time.sleep(0.2)
        yield base
    finally:
        os.killpg(gunicorn.pid, signal.SIGTERM)
        try:
            gunicorn.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(gunicorn.pid, signal.SIGKILL)
            gunicorn.wait(10)
        if output is not None:
            output.close()
