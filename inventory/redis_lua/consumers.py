"""The persisting consumers of a state's stream: each worker process reads as one of the
stream's consumer group (``values.PERSIST_GROUP``), acknowledges what it wrote
(``ACKNOWLEDGE``), and leaves the group when it is done.

Redis keeps a consumer in its group until it is deleted, and a process' name is new with
every process: without leaving, a live sale's streams would keep one consumer for every
worker process that ever drained them (every restart, every recycled child). A consumer
leaves only with nothing unacknowledged: what it was handed and did not write stays its own
until another consumer takes it over (``Reservations.pending``), and deleting the consumer
then would drop those entries unwritten. A consumer that died holding entries stays, with
nothing, once they are taken over, until the next consumer that leaves finds it idle past
the take-over's wait and removes it too (``CONSUMER_LEAVE``): live ones read again within
seconds, and one removed while it holds nothing is made again by its next read.
"""

from __future__ import annotations

import os
import socket

from django.conf import settings

from .values import PERSIST_GROUP, GroupKeys

# KEYS[1] a state's stream of reservations; ARGV[1] the persisting consumer group, ARGV[2]
# the consumer leaving it, ARGV[3] how long (ms) another consumer must have been idle,
# holding nothing, to be removed with it. In one script, so that nothing is handed to a
# consumer between the look at what it holds and its deletion. No stream or no group yet:
# nothing to leave. Returns 1 when ARGV[2] left (or was not there).
CONSUMER_LEAVE = """
local consumers = redis.pcall('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if consumers.err then return 1 end
local left = 1
for _, fields in ipairs(consumers) do
    local one = {}
    for i = 1, #fields, 2 do one[fields[i]] = fields[i + 1] end
    if one.name == ARGV[2] then
        if one.pending == 0 then redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], one.name) else left = 0 end
    elseif one.pending == 0 and one.idle >= tonumber(ARGV[3]) then
        redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], one.name)
    end
end
return left
"""


# Acknowledge and drop committed entries, and delete each one's take field from the state
# (``r:<user>:<take>``, its reservation number while it waits: a user's list reads by it) where
# it still names this reservation: a cancel between the commit and the acknowledgement frees
# the take's number, and a new take of the user's may hold it already, whose field stays.
# KEYS[1] the state's stream, KEYS[2] the state; ARGV[1] the consumer group, then for each
# entry its id, its take's field and its reservation number. An entry acknowledged but kept
# is never handed out again: acknowledged and dropped in one script.
# The ids go a thousand to a call: Lua spreads no more than some 8,000 values into one.
ACKNOWLEDGE = """
local ids = {}
for i = 2, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
for first = 1, #ids, 1000 do
    local last = math.min(first + 999, #ids)
    redis.call('XACK', KEYS[1], ARGV[1], unpack(ids, first, last))
    redis.call('XDEL', KEYS[1], unpack(ids, first, last))
end
for i = 2, #ARGV, 3 do
    if redis.call('HGET', KEYS[2], ARGV[i + 1]) == ARGV[i + 2] then redis.call('HDEL', KEYS[2], ARGV[i + 1]) end
end
return 1
"""


def consumer_name() -> str:
    """This worker process's name in the streams' consumer group."""
    return f"{socket.gethostname()}:{os.getpid()}"


def consumer_leave(client, group_id: int, consumer: str | None = None, *, idle_ms: int | None = None) -> bool:
    """Remove ``consumer`` (this process by default) from the state's consumer group, on
    ``client`` (the reservations' Redis), when it holds nothing unacknowledged; whether it
    left (or was not there). Any other consumer holding nothing and idle ``idle_ms``
    (``RESERVATIONS_CLAIM_IDLE_MS`` by default: past it, what it held was taken over) goes
    with it: a dead one, which no drain of its own will ever remove."""
    script = client.register_script(CONSUMER_LEAVE)
    keys = (GroupKeys.of(group_id).pending,)
    idle_ms = settings.RESERVATIONS_CLAIM_IDLE_MS if idle_ms is None else idle_ms
    return bool(script(keys, (PERSIST_GROUP, consumer or consumer_name(), idle_ms)))
