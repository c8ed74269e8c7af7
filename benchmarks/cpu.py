"""CPU seconds while a benchmark loads the server: the server's processes, the client's own,
MariaDB's and Redis', and how busy the whole machine was; and one timed run's figures."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness.server import process_tree_cpu

from .client import Tally


def proc_cpu(pid: int) -> float:
    """CPU seconds a process has used (user and system), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def mariadb_pid() -> int | None:
    """The MariaDB (or MySQL) server's process on this machine, if any."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ("mariadbd", "mysqld"):
                    return int(entry.name)
            except OSError:
                continue
    return None


def redis_cpu(client) -> float:
    """CPU seconds the Redis server behind ``client`` has used (user and system)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of every core since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


@dataclass(frozen=True)
class CpuSample:
    server: float
    client: float
    mariadb: float
    redis: float
    busy: int
    total: int


class CpuMeter:
    """CPU seconds of the server's processes, this process, MariaDB and Redis, and how busy
    the machine is."""

    def __init__(self, server_pid: int, redis_client) -> None:
        self.server_pid = server_pid
        self.redis = redis_client
        self.mariadb_pid = mariadb_pid()

    def sample(self) -> CpuSample:
        busy, total = machine_ticks()
        return CpuSample(
            server=process_tree_cpu(self.server_pid),
            client=time.process_time(),
            mariadb=proc_cpu(self.mariadb_pid) if self.mariadb_pid else 0.0,
            redis=redis_cpu(self.redis),
            busy=busy,
            total=total,
        )


@dataclass(frozen=True)
class Run:
    """One timed run: its answers and the CPU spent serving them."""

    tally: Tally
    before: CpuSample
    after: CpuSample

    def ms_per_request(self, part: str) -> float:
        used = getattr(self.after, part) - getattr(self.before, part)
        return 1000 * used / max(self.tally.served, 1)

    @property
    def machine_busy(self) -> float:
        total = self.after.total - self.before.total
        return (self.after.busy - self.before.busy) / total if total else 0.0
