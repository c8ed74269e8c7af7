"""The faults, one class each: what it breaks mid-sale, how it ends, and what it concerns.

A fault is injected once per run, ``--fault-at`` seconds into the load; ``inject`` breaks
something and returns at once, ``heal`` ends the fault ``--down`` seconds later (or at
once, for a process that its supervisor restarts) and returns the moment it ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import redis

from locking.testing import RedisServer

from ..server import ROOT, Server


@dataclass
class Stage:
    """What the faults act on: the server under test, its own Redis server and the Celery
    worker beside it, which the stage supervises as a process manager would: a worker that
    exits is started again as it was (``restart_worker``)."""

    server: Server
    redis: RedisServer
    celery_log: Path | None = None
    worker_pid: int | None = None
    # Processes started here (restarted workers), stopped when the runner ends.
    started: list[subprocess.Popen] = field(default_factory=list)
    # Workers started again because they had exited (not those a fault restarted).
    worker_restarts: int = 0
    supervising: threading.Event = field(default_factory=threading.Event)
    _stopped: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        if self.worker_pid is not None:
            self.worker_command = Path(f"/proc/{self.worker_pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            environ = Path(f"/proc/{self.worker_pid}/environ").read_bytes().rstrip(b"\0").split(b"\0")
            self.worker_env = dict(item.decode().split("=", 1) for item in environ if b"=" in item)
            self.supervising.set()
            threading.Thread(target=self._supervise, daemon=True).start()

    def worker_alive(self) -> bool:
        try:
            state = Path(f"/proc/{self.worker_pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")

    def restart_worker(self) -> None:
        output = open(self.celery_log, "a") if self.celery_log is not None else None  # noqa: SIM115
        worker = subprocess.Popen(
            [part.decode() for part in self.worker_command], cwd=ROOT, env=self.worker_env, stdout=output, stderr=output
        )
        self.started.append(worker)
        self.worker_pid = worker.pid

    def _supervise(self) -> None:
        # A Celery worker whose broker went away may stop for good (kombu, reconnecting,
        # met a connection already gone: "Unrecoverable error"); deployed, a process
        # manager starts it again, and so does this.
        while not self._stopped.wait(0.5):
            if self.supervising.is_set() and not self.worker_alive():
                self.worker_restarts += 1
                self.restart_worker()

    def stop_started(self) -> None:
        self._stopped.set()
        for process in self.started:
            process.terminate()
        for process in self.started:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


class Fault:
    name: ClassVar[str]
    summary: ClassVar[str]
    # The strategies it runs on by default; ``deferred_only`` faults concern only those.
    strategies: ClassVar[tuple[str, ...]] = ("db_atomic", "redis_lock", "redis_lua")
    # Whether requests in flight may get no answer at all (a process serving them killed).
    drops_requests: ClassVar[bool] = False
    # The /healthz key that must say "error" while the fault lasts, if any.
    health_names: ClassVar[str | None] = None
    # Seconds after the fault's end within which answers must be normal again.
    recover_within: ClassVar[float] = 10.0

    def concerns(self, *, deferred: bool) -> bool:
        """Whether a strategy (deferred or not) has anything to show under this fault."""
        return True

    def inject(self, stage: Stage, group_id: int) -> None:
        raise NotImplementedError

    def heal(self, stage: Stage, down: float) -> float:
        """End the fault after ``down`` seconds; return when it ended (``time.time()``)."""
        time.sleep(down)
        return time.time()

    def pending_lost(self) -> set[int]:
        """Reservation ids the fault took away by design (none, but for a Redis restart)."""
        return set()


def children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class WorkerKill(Fault):
    """SIGKILL of one gunicorn worker process mid-request; gunicorn starts another."""

    name = "worker-kill"
    summary = "SIGKILL of a gunicorn worker during purchases and draws; gunicorn restarts it"
    drops_requests = True
    # A killed holder of a redis_lock lock leaves it until its lease (5 s) ends.
    recover_within = 10.0

    def inject(self, stage: Stage, group_id: int) -> None:
        self.before = set(children(stage.server.pid))
        victim = min(self.before)
        os.kill(victim, signal.SIGKILL)
        self.victim = victim

    def heal(self, stage: Stage, down: float) -> float:
        # gunicorn's arbiter notices within a second and forks a replacement.
        give_up = time.monotonic() + 30
        while time.monotonic() < give_up:
            now = set(children(stage.server.pid))
            if self.victim not in now and len(now) >= len(self.before):
                return time.time()
            time.sleep(0.05)
        raise RuntimeError("gunicorn did not replace the killed worker within 30 s")


class RedisRestart(Fault):
    """The server's Redis killed and started again empty on the same port after ``--down``
    seconds: locks, fences, the broker's queues and redis_lua's state are gone."""

    name = "redis-restart"
    summary = "Redis killed mid-sale and restarted empty: locks, fences, queues and redis_lua state gone"
    health_names = "redis"
    # redis_lua answers 503 until a worker rebuilt the state (asked by the first refusal);
    # the lock strategies sell again at once, or within a lease.
    recover_within = 10.0

    def __init__(self) -> None:
        self.snapshot: set[int] = set()

    def inject(self, stage: Stage, group_id: int) -> None:
        self.snapshot = self._waiting(stage.redis.url, group_id)
        stage.redis.stop()

    @staticmethod
    def _waiting(url: str, group_id: int) -> set[int]:
        """The reservations of the group waiting in Redis, read with every write paused, so
        that none is made between this read and the kill that follows it."""
        from inventory.reservations import GroupKeys, reservation_id

        client = redis.Redis.from_url(url, socket_timeout=5)
        try:
            client.execute_command("CLIENT", "PAUSE", 5000, "WRITE")
            entries = client.xrange(GroupKeys.of(group_id).pending)
        finally:
            client.close()
        return {reservation_id(group_id, int(entry_id.split(b"-")[0])) for entry_id, _ in entries}

    def heal(self, stage: Stage, down: float) -> float:
        time.sleep(down)
        stage.redis.start()
        return time.time()

    def pending_lost(self) -> set[int]:
        return set(self.snapshot)


class CeleryKill(Fault):
    """The Celery worker (its main process and its pool) SIGKILLed while it writes a
    batch, and started again as it was after ``--down`` seconds."""

    name = "celery-kill"
    summary = "the Celery worker SIGKILLed mid-batch and restarted: every reservation written once"
    strategies = ("redis_lua",)

    def concerns(self, *, deferred: bool) -> bool:
        return deferred  # only a deferred strategy has a worker write its records

    # The new worker boots, and the dead one's entries are taken over under the group's
    # lock once its lease (5 s) ends.
    recover_within = 15.0

    def inject(self, stage: Stage, group_id: int) -> None:
        pid = stage.worker_pid
        if pid is None:
            raise RuntimeError("no Celery worker runs beside the server")
        stage.supervising.clear()
        for victim in [pid, *children(pid)]:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def heal(self, stage: Stage, down: float) -> float:
        time.sleep(down)
        stage.restart_worker()
        stage.supervising.set()
        return time.time()


FAULTS: dict[str, type[Fault]] = {fault.name: fault for fault in (WorkerKill, RedisRestart, CeleryKill)}
