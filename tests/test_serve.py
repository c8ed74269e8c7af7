"""``make run`` (scripts/serve.py) starts and stops quietly: no warning on start, a missing
database created or named in one line, the Celery worker (both queues) and beat beside
gunicorn, started again when they stop, and nothing but its own goodbyes on Ctrl-C, after
which none of them is left."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import MySQLdb
import pytest
import redis
from django.conf import settings

from harness.server import WORKER_PROCESSES
from loadtests.scenarios import SERVER_SETTINGS

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
BROKER = "redis://127.0.0.1:6379/2"


@pytest.fixture(scope="module")
def serve():
    spec = importlib.util.spec_from_file_location("serve", ROOT / "scripts" / "serve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def server_url(name: str, *, password: str | None = None) -> str:
    db = settings.DATABASES["default"]
    password = db["PASSWORD"] if password is None else password
    return f"mysql://{db['USER']}:{password}@{db['HOST']}:{db['PORT'] or 3306}/{name}"


def drop(name: str) -> None:
    db = settings.DATABASES["default"]
    connection = MySQLdb.connect(host=db["HOST"], port=int(db["PORT"] or 3306), user=db["USER"], passwd=db["PASSWORD"])
    try:
        connection.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        connection.close()


@pytest.fixture
def missing_database():
    name = f"{settings.DATABASES['default']['NAME']}_serve_missing"[:64]
    drop(name)
    yield name
    drop(name)


def started_by(port: int) -> dict[int, str]:
    """{pid: command line} of every process whose environment says ``PORT=port``: serve.py
    and whatever it started (they inherit its environment), and nothing else, since the
    port is free and the test's own."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # gone meanwhile, or not ours
            continue
        if f"PORT={port}".encode() in environ:
            found[int(entry.name)] = command
    return found


def test_whitenoise_starts_without_a_warning():
    # It warned "No directory at: .../var/static/" for a STATIC_ROOT that a local run never fills.
    from whitenoise.middleware import WhiteNoiseMiddleware

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WhiteNoiseMiddleware(get_response=lambda request: None)


def test_a_missing_database_is_created(serve, missing_database, capsys):
    assert serve.database_ready(server_url(missing_database))
    assert f"There was no database {missing_database!r}" in capsys.readouterr().out
    assert serve.database_ready(server_url(missing_database))  # now there, and nothing to say
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "url",
    [
        "mysql://root:@127.0.0.1:1/anything",  # nothing listens
        pytest.param(None, id="wrong password"),
    ],
)
def test_a_database_that_cannot_be_used_is_one_line_not_a_traceback(serve, capsys, url):
    url = url or server_url("anything", password="not-the-password")
    assert not serve.database_ready(url)
    out = capsys.readouterr().out
    assert out.startswith("[run] Cannot use the database at ") and out.count("\n") == 1


@contextmanager
def serve_started(database: str) -> Iterator[tuple[int, subprocess.Popen]]:
    """``make run`` as a terminal starts it: serve.py in a process group of its own, on a free
    port and the test's MariaDB database ``database``, its output in a pipe. Its Celery
    broker is a Redis database of its own, emptied first: a task another test left for its
    own items must not reach this worker, which knows none of them."""
    from locking.testing import free_port

    redis.Redis.from_url(BROKER).flushdb()
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DATABASE_URL": server_url(database),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_BROKER_URL": BROKER,
        "PORT": str(port),
    }
    # INSTANCE_NAMESPACE as make run leaves it, unset: derived from serve.py's own database.
    # The suite's, inherited, would have serve.py's beat sweep and reconcile this test
    # process's redis_lua items in the same Redis from a database that has none of them.
    for unset in ("LOCK_REDIS_URLS", "INSTANCE_NAMESPACE", *SERVER_SETTINGS):
        env.pop(unset, None)
    server = subprocess.Popen(
        [sys.executable, "scripts/serve.py"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # A shell that started the tests in the background ignores SIGINT, and so would its children.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        yield port, server
    finally:
        # Whatever the test left running: the whole group, then anything that escaped it.
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        for left in started_by(port):
            os.kill(left, signal.SIGKILL)


def test_sqlite_needs_nothing(serve, capsys):
    assert serve.database_ready("sqlite:///var/db.sqlite3")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("when", ["while starting", "once serving"])
def test_start_and_ctrl_c_are_quiet(missing_database, when):
    """What a terminal does: serve.py in its own process group, then Ctrl-C (SIGINT to the
    whole group), either as soon as it says it serves (gunicorn's and Celery's workers still
    starting) or once the site answers."""
    with serve_started(missing_database) as (port, server):
        lines: list[str] = []
        serving = threading.Event()

        def read() -> None:
            for line in server.stdout:
                lines.append(line)
                if "[run] Serving on" in line:
                    serving.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert serving.wait(120), "".join(lines)
        # Both were started before it says it serves (one that stopped at once, as one may on
        # a loaded machine, is started again: serve.py's CeleryChildren), so both are seen soon.
        commands = list(started_by(port).values())
        give_up = time.monotonic() + 30
        while not (
            any(" beat " in c and f"celerybeat-schedule-{port}" in c for c in commands)
            and any(" worker " in c and "-Q celery,lab" in c for c in commands)
        ):
            assert time.monotonic() < give_up, (commands, "".join(lines))
            time.sleep(0.2)
            commands = list(started_by(port).values())
        if when == "once serving":
            give_up = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=3):
                        break
                except OSError:
                    assert time.monotonic() < give_up, "".join(lines)
                    time.sleep(0.3)
            time.sleep(2)  # the Celery worker well into its start
        else:
            time.sleep(0.3)
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=60)
        reader.join(timeout=10)
        # Ctrl-C stopped the beat, the worker and gunicorn, each with its children.
        give_up = time.monotonic() + 10
        while started_by(port):
            assert time.monotonic() < give_up, started_by(port)
            time.sleep(0.2)
    out = "".join(lines)
    assert not list((ROOT / "var").glob(f"celerybeat-schedule-{port}*")), "the beat's schedule was left behind"
    # The race lab's lifecycle runs meet the settings ``make loadtest`` starts its worker with.
    lifecycle = next(line for line in lines if line.startswith("[run] Lifecycle: "))
    assert all(f"{name}={value}" in lifecycle for name, value in SERVER_SETTINGS.items()), lifecycle
    assert server.returncode == 0, out
    assert f"There was no database {missing_database!r}" in out
    assert "[run] Stopping." in out
    assert "[run] Celery beat started" in out
    for noise in ("Traceback", "KeyboardInterrupt", "[ERROR]", "UserWarning", "No directory at", "was sent SIG",
                  "Error:", "Usage:", "The Celery worker stopped", "The Celery beat stopped"):  # fmt: skip
        assert noise not in out, out


def test_a_celery_worker_that_stops_is_started_again(missing_database):
    """A worker whose broker restarted may exit; killed here, it is back within seconds,
    its killed pool processes gone with it, and Ctrl-C still stops everything."""
    with serve_started(missing_database) as (port, server):
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(server.stdout), daemon=True).start()

        def workers() -> dict[int, str]:
            return {pid: c for pid, c in started_by(port).items() if " worker " in c and "-Q celery,lab" in c}

        def wait_for(condition, what: str, seconds: float = 90):
            give_up = time.monotonic() + seconds
            while not (found := condition()):
                assert time.monotonic() < give_up, f"{what}: {''.join(lines)}"
                time.sleep(0.3)
            return found

        wait_for(lambda: any("[run] Serving on" in line for line in lines), "serving")
        first = wait_for(workers, "a worker and its pool")
        # The worker and its pool: one process for a lab run, and as many beside it as a load
        # run's worker has, so that two releases of one hold can meet in a lab run too.
        pool = WORKER_PROCESSES + 1
        first = wait_for(lambda: workers() if len(workers()) >= 1 + pool else None, f"the pool's {pool} processes")
        assert len(first) == 1 + pool, first
        group = {pid for pid in first if os.getpgid(pid) == pid}
        assert len(group) == 1, first
        (main,) = group
        os.kill(main, signal.SIGKILL)
        wait_for(lambda: any("The Celery worker stopped (exit status -9)" in line for line in lines), "noticed")
        wait_for(lambda: any("The Celery worker started again." in line for line in lines), "restarted", 30)
        again = wait_for(lambda: set(workers()) - set(first), "a new worker")
        assert not set(first) & set(workers()), "the killed worker's pool processes were left running"
        assert again
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=60)
        wait_for(lambda: not started_by(port), "everything stopped", 10)
    assert server.returncode == 0, "".join(lines)
