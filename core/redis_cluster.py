"""A Redis Cluster client for data that lives under one hash tag per item (``redis_lua``'s
reservations), the master that serves a key, and ``WAIT`` on it.

The client is made from the URLs of some of the cluster's nodes (any of them, masters or
replicas: it reads the map of the slots from the first that answers), with no retry behind
the caller's back, as ``locking.integration.locks_redis`` is: a script sent again after a
lost answer may run twice. A call that meets a node gone fails, and the client reads the map
again for the next one (``core.redis_script.ClusterOwnConnectionScript``, and redis-py's
own commands alike).
"""

from __future__ import annotations

import os
import threading
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

_clients: dict[tuple[str, ...], tuple[int, RedisCluster]] = {}
_guard = threading.Lock()


def cluster_nodes(urls: list[str]) -> list[ClusterNode]:
    """The nodes that ``redis://host:port`` URLs name."""
    nodes = []
    for url in urls:
        parts = urlsplit(url.strip())
        if parts.scheme != "redis" or not parts.hostname:
            raise ValueError(f"a cluster node is named by a redis://host:port URL, not {url!r}")
        nodes.append(ClusterNode(parts.hostname, parts.port or 6379))
    return nodes


def cluster_redis(urls: list[str], **options) -> RedisCluster:
    """This process's client of the cluster whose nodes include those of ``urls`` (their
    password, if any, is the first URL's); ``options`` are the connections' (timeouts; a
    ``retry`` among them is not used). One per process: one inherited through fork() is not."""
    options.pop("retry", None)
    key = tuple(urls)
    with _guard:
        pid, client = _clients.get(key, (0, None))
        if client is None or pid != os.getpid():
            password = urlsplit(urls[0]).password
            client = RedisCluster(
                startup_nodes=cluster_nodes(urls),
                password=unquote(password) if password else None,
                retry=Retry(NoBackoff(), 0),
                **options,
            )
            _clients[key] = (os.getpid(), client)
        return client


def server_of(client: redis.Redis | RedisCluster, key: str) -> redis.Redis:
    """The client of the server that serves ``key``: ``client`` itself, or, for a cluster,
    the client of the master of the key's slot. Its ``pipeline(transaction=True)`` runs a
    ``MULTI`` of that slot's keys with the replies read as any command's: redis-py's cluster
    transactions hand back the raw replies of commands such as ``XRANGE``."""
    if isinstance(client, RedisCluster):
        return client.get_redis_connection(client.get_node_from_key(key))
    return client


def replicated(client: redis.Redis | RedisCluster, key: str, replicas: int, timeout_ms: int) -> bool:
    """Whether ``replicas`` replicas of the master that serves ``key`` have every write it
    had made when this was called, waited for up to ``timeout_ms`` (``WAIT``).

    ``WAIT`` waits for the replicas to reach the offset of the connection's last command,
    whatever that command was: a ``PING`` first, on the same connection, makes that offset
    the master's own at this moment, writes of other connections included."""
    pipe = server_of(client, key).pipeline(transaction=False)  # one connection, one round trip
    pipe.ping()
    pipe.execute_command("WAIT", replicas, timeout_ms)
    return int(pipe.execute()[1]) >= replicas
