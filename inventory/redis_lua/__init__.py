"""The machinery of the ``redis_lua`` strategy (``inventory.strategies.redis_lua``), one
module per concern:

- ``scripts``: the Lua scripts, and the keys of a stock group they use;
- ``values``: the reservations' ids, the group's keys, the rules and the values the scripts
  answer and the stream holds;
- ``client``: the scripts bound to a Redis client, and the one every process uses.
"""
