"""One round trip on a pooled connection, for the lock's hot path.

redis-py's command path wraps every call in retries, reconnection and
instrumentation. For acquire and release we want less: the commands written
in one packet, their replies read in order, no retry behind the caller's back
(a lock operation must fail loudly), and the connection dropped if anything
goes wrong so that a half-read reply never reaches the next user.
"""

from __future__ import annotations

from redis import Redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError, ResponseError


def call(client: Redis, *commands: tuple) -> list:
    """Send ``commands`` in one write and return their replies, in order; the first command
    the server refused raises its error, once every reply is read."""
    replies = call_each(client, *commands)
    for reply in replies:
        if isinstance(reply, ResponseError):
            raise reply
    return replies


def call_each(client: Redis, *commands: tuple) -> list:
    """As :func:`call`, but a command the server refused answers its error in its place
    rather than raise it, so that the other commands' replies are kept (one of them may
    have changed something: a wait that popped its value)."""
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        connection.send_packed_command(connection.pack_commands(commands))
        replies = []
        for _ in commands:
            try:
                replies.append(connection.read_response())
            except ResponseError as error:  # read whole: the connection stays in step
                replies.append(error)
        return replies
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)


def evalsha(client: Redis, script: Script, keys: tuple, args: tuple):
    """Run a registered script in one round trip, loading it first if the server lost it."""
    command = ("EVALSHA", script.sha, len(keys), *keys, *args)
    try:
        return call(client, command)[0]
    except NoScriptError:
        client.script_load(script.script)
        return call(client, command)[0]
