"""The server under load: gunicorn with several worker processes, the Redis servers that
Redlock takes its majority from, and, for ``redis_lua``, a Celery worker and beat that
persist its reservations, all started and stopped by the load test or benchmark itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from locking.testing import RedisServer, free_port

ROOT = Path(__file__).resolve().parent.parent
REDLOCK_SERVERS = 3
# The Celery worker's processes beside a load run's server: two, so that a hold's expiry task
# and the beat's sweep (or two expiry tasks sent by two web processes) can release the same
# record at once, as the lifecycle's scenarios need for ``none`` to show its double release,
# and a redis_lua drain is not queued behind a release. ``make run`` gives its worker one
# more, for the race lab's run, which holds its process for the whole run.
WORKER_PROCESSES = 2


@dataclass(frozen=True)
class Server:
    """The server under load; ``pid`` is None for a server this process did not start
    (the race lab drives the server it runs in), whose CPU time is then not measured, and
    ``worker_pid`` the Celery worker started beside it, if any."""

    host: str
    pid: int | None = None
    # The environment it runs in, for processes that must share its settings (a Celery worker).
    env: dict[str, str] | None = None
    worker_pid: int | None = None
    # The Redis servers Redlock takes its majority from (the fault runner stops some).
    lock_servers: tuple[RedisServer, ...] = ()

    @property
    def port(self) -> int:
        return int(self.host.rsplit(":", 1)[1])

    def cpu_seconds(self) -> float:
        """CPU seconds used so far by gunicorn's master and workers (0 when unknown)."""
        return process_tree_cpu(self.pid) if self.pid is not None else 0.0

    def worker_cpu_seconds(self) -> float:
        """CPU seconds used so far by the Celery worker and its processes (0 when unknown)."""
        return process_tree_cpu(self.worker_pid) if self.worker_pid is not None else 0.0


def server_env(
    *,
    database_url: str,
    redis_url: str,
    lock_urls: list[str],
    race_window_ms: int,
    processes: int = 1,
    broker_url: str | None = None,
) -> dict[str, str]:
    """The environment of the server's processes (and of a Celery worker beside them); the
    broker is ``redis_url`` unless ``broker_url`` says otherwise."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        CELERY_BROKER_URL=broker_url or redis_url,
        LOCK_REDIS_URLS=",".join(lock_urls),
        RACE_WINDOW_MS=str(race_window_ms),
        # The crowd comes from one address, faster than any person: limits would measure themselves.
        RATE_LIMITS_ENABLED="0",
        # What the race lab judges `local` by: how many processes serve.
        WEB_CONCURRENCY=str(processes),
        PYTHONPATH=str(ROOT),
    )
    return env


def wait_healthy(url: str, timeout: float = 60) -> None:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the server at {url} did not become healthy")


def process_tree_cpu(pid: int) -> float:
    """CPU seconds used so far by ``pid`` and its children (gunicorn's workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(child) for child in children]
    except OSError:
        pass
    for one in pids:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, IndexError, ValueError):
            pass
    return total


@contextmanager
def running_celery(env: dict[str, str], log: Path | None = None) -> Iterator[int]:
    """A Celery worker on the default queue and Celery beat, in ``env`` (the server's); yields
    the worker's pid, and stops both on the way out. Their output goes to ``log`` when given.

    The worker takes only the default queue: redis_lua's drains and the beat's sweeps, never
    a race lab run that a shared broker may hold. The beat sweeps as deployed, but does not
    reconcile: a repair during the run would hide from the audit the drift it is there to find.
    """
    env = env | {"RESERVATIONS_RECONCILE_SECONDS": str(24 * 3600)}
    if env.get("PROMETHEUS_MULTIPROC_DIR"):
        # Beside the server's counts, in a subdirectory /metrics adds in (config/gunicorn.py).
        counts = Path(env["PROMETHEUS_MULTIPROC_DIR"]) / "celery"
        counts.mkdir(exist_ok=True)
        env["PROMETHEUS_MULTIPROC_DIR"] = str(counts)
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="loadtest-beat-")))
        output = stack.enter_context(open(log, "a")) if log is not None else None  # noqa: SIM115
        celery = [sys.executable, "-m", "celery", "-A", "config", "--quiet"]
        worker = subprocess.Popen(
            [*celery, "worker", "-Q", "celery", "--concurrency", str(WORKER_PROCESSES),
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=env, stdout=output, stderr=output,
        )  # fmt: skip
        beat = subprocess.Popen(
            [*celery, "beat", "--schedule", str(folder / "schedule")],
            cwd=ROOT, env=env, stdout=output, stderr=output,
        )  # fmt: skip
        try:
            yield worker.pid
        finally:
            for process in (beat, worker):
                process.terminate()
            for process in (beat, worker):
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)


@contextmanager
def running_server(
    *,
    database_url: str,
    redis_url: str,
    processes: int,
    race_window_ms: int,
    port: int = 0,
    broker_url: str | None = None,
    celery_log: Path | None = None,
    celery: bool = False,
    settings: dict[str, str] | None = None,
    say: Callable[[str], None] | None = None,
) -> Iterator[Server]:
    """gunicorn on 127.0.0.1 (``port``, or a free one), healthy, with its own Redlock servers,
    and with ``celery`` a Celery worker and beat beside it (``running_celery``, output to
    ``celery_log``); everything stopped on the way out. ``settings`` are added to the
    environment of its processes (a benchmark's switches); ``say`` tells what starts."""
    say = say or (lambda message: None)
    lock_servers = [RedisServer().start() for _ in range(REDLOCK_SERVERS)]
    # The workers' Prometheus counts (config/gunicorn.py), gone with the server.
    metrics = tempfile.mkdtemp(prefix="loadtest-metrics-")
    try:
        port = port or free_port()
        host = f"http://127.0.0.1:{port}"
        env = server_env(
            database_url=database_url,
            redis_url=redis_url,
            lock_urls=[server.url for server in lock_servers],
            race_window_ms=race_window_ms,
            processes=processes,
            broker_url=broker_url,
        )
        env["PROMETHEUS_MULTIPROC_DIR"] = metrics
        env["LAB_TARGET_URL"] = host  # the race lab's crowd comes back to this server
        env["PAYMENT_CALLBACK_URL"] = f"{host}/api/payments/callback"  # and the payment provider
        env.update(settings or {})
        say(f"starting gunicorn: {processes} worker processes on {host}, RACE_WINDOW_MS={race_window_ms}")
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--config", str(ROOT / "config" / "gunicorn.py"), "config.wsgi",
             "--bind", f"127.0.0.1:{port}",
             "--workers", str(processes), "--log-level", "warning"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        try:
            with ExitStack() as stack:
                worker_pid = None
                if celery:
                    say(f"starting a Celery worker (2 processes) and beat, broker {env['CELERY_BROKER_URL']}")
                    worker_pid = stack.enter_context(running_celery(env, celery_log))
                wait_healthy(host)
                yield Server(
                    host=host, pid=gunicorn.pid, env=env, worker_pid=worker_pid, lock_servers=tuple(lock_servers)
                )
        finally:
            gunicorn.terminate()
            gunicorn.wait(30)
    finally:
        for lock_server in lock_servers:
            lock_server.close()
        shutil.rmtree(metrics, ignore_errors=True)
