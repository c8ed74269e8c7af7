"""A database connection cut in use, as a server's restart or a network's drop cuts it: killed
from another connection right after a statement went through, so that what follows on it (its
COMMIT) fails with the connection lost.

    with connection.execute_wrapper(cut_after("INSERT INTO `orders_order`")):
        ...
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connection, connections


def cut_after(statement: str):
    """An ``execute_wrapper`` that kills its connection once a statement starting with
    ``statement`` has run on it."""

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith(statement):
            killer = connections.create_connection(DEFAULT_DB_ALIAS)
            with killer.cursor() as cursor:
                cursor.execute("KILL CONNECTION %s", [connection.connection.thread_id()])
            killer.close()
        return result

    return wrapper
