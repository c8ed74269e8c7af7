"""A Lua script called over a connection of the calling thread's own, not the client's pool.

A purchase or a draw under ``redis_lua`` is one script call, and in a request that call
cost more CPU in redis-py's client than on the wire: taking a connection from the pool
and giving it back (a lock, the pool's bookkeeping and its observability hooks), the
retry wrapper and the response callbacks came to about 85 us of the 200 us the call cost
(measured in one process through Django's WSGI handler; ``BENCHMARKS.md``). Here the
thread keeps one ``redis.Connection``, made with the pool's own settings (timeouts, retry
policy, health checks), and the call is the connection's send and read alone.

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
from collections.abc import Sequence

import redis
from redis.exceptions import NoScriptError


class OwnConnectionScript:
    """``script`` on the server of ``client``, each thread calling it over a connection of
    its own (made from ``client``'s pool settings, outside the pool).

    Arguments:
        client: the client whose connection settings to use; its pool is not touched.
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
                self._loader.sha = self._loader.registered_client.script_load(self._loader.script)
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
        local = self._local
        connection = getattr(local, "connection", None)
        # A connection inherited through fork() is the parent's socket: never shared.
        if connection is None or local.pid != os.getpid():
            connection = local.connection = self._pool.connection_class(**self._pool.connection_kwargs)
            local.pid = os.getpid()
        connection.connect()  # nothing to do when connected
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
