"""The machinery under the ``redis_lua`` strategy (``inventory.strategies.redis_lua``): one
module per concern, each standing only on those listed before it.

- ``closing``: when an ended sale's keys leave Redis;
- ``scripts``: the Lua scripts, and the keys of a stock group they use;
- ``returns``: the script that gives released units back, with the takes they free and the
  users' abandoned holds;
- ``values``: the reservations' ids, the group's keys, the rules and the values the scripts
  answer and the stream holds;
- ``client``: the scripts bound to a Redis client, and the one every process uses;
- ``transfer_scripts`` and ``transfers``: units moved between a bucketed item's states
  (borrowing, the rebalancer, the recovery of a move stopped half-way);
- ``bucket_states``: a bucketed item's states loaded under one epoch, and a take at the
  user's home state, borrowing when it is empty;
- ``persist``: one batch of pending reservations written to the database, exactly once;
- ``drain``: the group's lock (shared by the drains, exclusive for the rest; a bucket's
  state is locked as its group) and the drain of a stream under it, batch after batch;
- ``reconcile``: the group's state in Redis compared with the database, and repaired;
- ``reconcile_buckets``: the same for a bucketed item's states;
- ``records_insert``: a batch's records and their INSERT, made ready before its transaction;
- ``item_buckets``: a bucketed item's states loaded, dropped, changed and given back units
  together;
- ``item_states``: an item's state (or states) through its life, whatever its product, over
  the above, to its close long after its sale ended.

The Celery tasks that run them stay in ``inventory.tasks``, whose names the beat and the
strategy send.
"""
