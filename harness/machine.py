"""What machine a benchmark ran on, printed at the top of every report."""

from __future__ import annotations

import os
import platform
import subprocess


def describe(redis_client=None, *, commit: bool = True) -> str:
    """CPU, cores, memory, OS and Python (and Redis, given a client); the git commit unless
    ``commit`` is False (for callers that show it on its own)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        with open("/proc/meminfo") as info:
            mem_kb = int(next(line.split()[1] for line in info if line.startswith("MemTotal")))
        memory = f"{mem_kb / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        memory = "?"
    parts = [
        f"{cpu}, {os.cpu_count()} cores, {memory}",
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}",
    ]
    if redis_client is not None:
        parts.append(f"Redis {redis_client.info('server')['redis_version']} on 127.0.0.1")
    if commit:
        parts.append(f"commit {git_commit() or 'unknown'}")
    return "; ".join(parts)


def git_commit() -> str:
    """The short hash of the checked-out commit, or "" where there is no git (a container)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return head.stdout.strip()
