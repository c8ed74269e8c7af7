"""What the faults act on, and the Celery worker beside the server kept running as a process
manager would keep it."""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from harness.server import ROOT, Server
from locking.testing import RedisServer

from .mariadb import MariaDBServer


@dataclass
class Stage:
    """What the faults act on: the server under test, its own Redis server, its own MariaDB
    server when a fault restarts it, its own Redis Cluster when a fault kills a node of it,
    the folder of its fault points (``core.faultpoints``) and the Celery worker beside it,
    which the stage supervises as a process manager would: a worker that exits is started
    again as it was (``restart_worker``)."""

    server: Server
    redis: RedisServer
    mariadb: MariaDBServer | None = None
    # The Redis Cluster (masters first) that redis_lua's reservations are on, for the faults
    # that need one (``Fault.reservations_cluster``).
    cluster: list[RedisServer] | None = None
    fault_points: Path | None = None
    celery_log: Path | None = None
    worker_pid: int | None = None
    # The run's product (``loadtests.verdict``) and its fresh item (a ``products.Target``,
    # once the fault strikes): what the lifecycle's faults read their holds from.
    product: str = ""
    target: object = None
    # The crowd's ``username token`` lines: a fault that acts as a buyer (late-callback).
    tokens: Path | None = None
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
