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
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence

import redis
from redis.exceptions import NoScriptError


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
            the raw reply as the connection reads it (bytes unless the client decodes).
    """

    def __init__(self, client: redis.Redis, script: str) -> None:
        self._loader = client.register_script(script)  # knows the SHA, loads on NOSCRIPT
        self._pool = client.connection_pool
        self._local = threading.local()

    @property
    def sha(self) -> str:
        return self._loader.sha

    def __call__(self, *, keys: Sequence = (), args: Sequence = ()):
        connection = self._connection()
        try:
            try:
                return self._send(connection, keys, args)
            except NoScriptError:
                # Loaded over this connection too: the pool may have none left to lend.
                connection.send_command("SCRIPT", "LOAD", self._loader.script)
                sha = connection.read_response()
                self._loader.sha = sha.decode() if isinstance(sha, bytes) else sha
                return self._send(connection, keys, args)
        except BaseException:
            # Whatever was left unread (an error, or a signal mid-answer) must not be the
            # next call's answer.
            connection.disconnect()
            raise

    def _send(self, connection: redis.Connection, keys: Sequence, args: Sequence):
        connection.send_command("EVALSHA", self._loader.sha, len(keys), *keys, *args)
        return connection.read_response()

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


def script_on_own_connections(client, script: str):
    """``script`` over each thread's own connection for a plain client; for a cluster
    client (``redis.cluster.RedisCluster``, whose connections belong to the node of each
    key's slot) the library's ``register_script``, called alike."""
    if isinstance(client, redis.Redis):
        return OwnConnectionScript(client, script)
    return client.register_script(script)
