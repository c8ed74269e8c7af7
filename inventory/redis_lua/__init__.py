"""The machinery under the ``redis_lua`` strategy (``inventory.strategies.redis_lua``): one
module per concern, each standing only on those listed before it.

- ``scripts``: the Lua scripts, and the keys of a stock group they use;
- ``values``: the reservations' ids, the group's keys, the rules and the values the scripts
  answer and the stream holds;
- ``client``: the scripts bound to a Redis client, and the one every process uses;
- ``persist``: one batch of pending reservations written to the database, exactly once;
- ``drain``: the group's lock, the drain of its stream under it, batch after batch, and the
  rebuild, opening and retirement of its state;
- ``reconcile``: the group's state in Redis compared with the database, and repaired;
- ``item_states``: an item's state through its life, whatever its product, over the above.

The Celery tasks that run them stay in ``inventory.tasks``, whose names the beat and the
strategy send.
"""
