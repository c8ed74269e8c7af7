"""The Lua scripts of the ``redis_lua`` strategy, as named constants.

A stock group's state lives in Redis under one hash tag (``<ns>:res:{group:<id>}:...``,
``<ns>`` the instance namespace of ``core.namespace``), so that every script touches a
single Cluster slot:

- ``...:state``, a hash: ``begin_ms`` and ``end_ms`` (the sale window), ``limit`` (takes
  per user: 1 for a voucher, the draw limit for a pool), ``no_take`` (the weight of
  taking nothing: a pool's "no prize"), and ``stock:<stock_id>`` (units left) for every
  row of the group;
- ``...:takers``, a hash: user id -> takes so far (its keys are a voucher's buyer set);
- ``...:seqs``, a hash with a field ``<user>:<n>`` for every take number n in use: a take
  gets the user's lowest free number, so that one undone frees its number for the next
  (a draw's number is its per-user backstop in the database, and must not repeat). Every
  script keeps one mark per take counted in ``takers``, which reconciliation's first
  comparison counts on (``inventory.redis_lua.reconcile``);
- ``...:checked``, a flag that expires: set by a reconciliation that compared each user's
  takes and found them whole;
- ``...:pending``, a stream: one entry per reservation not yet persisted, read by the
  persisting worker through the consumer group ``persist``. An entry's id is
  ``<n>-0``, n the reservation's number, so that a reservation's state is found by its
  id in one lookup (``XRANGE`` of that id); its fields are the user, the row taken (or
  "" for nothing), the take's number, ``at`` (Redis time in ms) and ``rid``, the id of
  the request that made it ("" for none), which the worker's line for its row carries;
- ``...:ids``, a counter: the group's reservations are numbered 1, 2, ... (the
  reservation's id is made from the group and this number, ``values.reservation_id``);
- ``...:failed``, a hash: reservation number -> ``<user>:<stock id or "">:<ms>:<why>`` for a
  reservation that could not be persisted (it was undone: the record never existed,
  and the user is told so);
- ``...:kick``, a flag with a short expiry: set by the reservation that found it unset,
  whose caller then asks a worker to persist the group's stream. So a crowd enqueues one
  persisting task per flag period rather than one per request; a drain holds the flag
  while it paces through the stream, then clears it and reads once more, so a
  reservation it did not read sets it again.

One take, any product, as in ``inventory.strategies``: a voucher is a group of one row today,
with a limit of 1 and no weight of taking nothing, so RESERVE's weighted choice always lands
on its row; a pool's choice is weighted by the stock left, at the moment of the script.

The rate limits of a reservation's request count in RESERVE's own round trip: their
counters (``core.ratelimit``) are keys of the group's hash tag, ``<ns>:rate:{group:<id>}:...``.
"""

from core.ratelimit import RATE_WAIT

# Reserve one unit for a user: count the request's rate limits; check the window (Redis
# time), the user's takes and the stock; choose a row weighted by its stock (or nothing,
# by the weight of taking nothing); append the pending reservation, decrement the row and
# count the take. The append comes before every other write: should it fail (an entry id
# not above the stream's last), nothing has been taken.
# KEYS[1] state, KEYS[2] takers, KEYS[3] pending stream, KEYS[4] reservation counter,
# KEYS[5] take numbers in use, KEYS[6] the kick flag, KEYS[7...] the request's rate-limit
#         counters (none when the limits are off)
# ARGV[1] user id, ARGV[2] a uniform random number in [0, 1) drawn by the caller (so that
#         tests can seed it), ARGV[3] the kick flag's lifetime in ms, ARGV[4] the request's
#         id ("" for none), stored in the stream entry for the worker's log line,
#         ARGV[5...] each rate-limit counter's limit and window in ms, in pairs
# Returns {"ok", stock id or "", seq, n, takes, kick, limit}, where seq is this take's number
# among the user's takes (the database's per-user backstop), n the reservation's number in
# the group, takes the user's takes now, kick 1 when the caller should ask for the
# stream to be persisted, and limit the limit of takes it checked; or {"rate_limited", ms
# to wait}; or {refusal}: "unavailable" (no state: never sell from nothing), "not_started",
# "ended", "limit", "sold_out".
RESERVE = (
    RATE_WAIT
    + """
local wait = rate_wait(7, 5)
if wait > 0 then return {'rate_limited', wait} end
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then return {'unavailable'} end
local rules, ids, left = {}, {}, {}
for i = 1, #fields, 2 do
    local name, value = fields[i], fields[i + 1]
    if string.sub(name, 1, 6) == 'stock:' then
        local units = tonumber(value)
        if units > 0 then
            local id = tonumber(string.sub(name, 7))
            ids[#ids + 1] = id
            left[id] = units
        end
    else
        rules[name] = tonumber(value)
    end
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if now_ms < rules['begin_ms'] then return {'not_started'} end
if now_ms >= rules['end_ms'] then return {'ended'} end
local taken = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if taken >= rules['limit'] then return {'limit'} end
if #ids == 0 then return {'sold_out'} end
table.sort(ids)
local total = rules['no_take'] or 0
for _, id in ipairs(ids) do total = total + left[id] end
local point = tonumber(ARGV[2]) * total
local chosen = ''
for _, id in ipairs(ids) do
    if point < left[id] then chosen = id break end
    point = point - left[id]
end
local seq = 1
while redis.call('HEXISTS', KEYS[5], ARGV[1] .. ':' .. seq) == 1 do seq = seq + 1 end
local n = redis.call('INCR', KEYS[4])
redis.call('XADD', KEYS[3], n .. '-0', 'user', ARGV[1], 'stock', tostring(chosen), 'seq', seq, 'at', now_ms,
           'rid', ARGV[4])
if chosen ~= '' then redis.call('HINCRBY', KEYS[1], 'stock:' .. chosen, -1) end
local takes = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
redis.call('HSET', KEYS[5], ARGV[1] .. ':' .. seq, 1)
local kick = 0
if redis.call('SET', KEYS[6], 1, 'NX', 'PX', ARGV[3]) then kick = 1 end
return {'ok', tostring(chosen), seq, n, takes, kick, rules['limit']}
"""
)

# Undo a reservation that could not be persisted for good, once: only while its stream
# entry is still unacknowledged by the persisting group (so that neither a second
# compensation nor one after a successful persist can run).
# KEYS[1] state, KEYS[2] takers, KEYS[3] pending stream, KEYS[4] failed reservations,
# KEYS[5] take numbers in use
# ARGV[1] stream entry id, ARGV[2] consumer group, ARGV[3] user id,
# ARGV[4] stock id or "" (a take of nothing), ARGV[5] reservation number, ARGV[6] why,
# ARGV[7] the take's number, ARGV[8] when it was reserved (ms)
# Returns 1 when compensated, 0 when there was nothing to undo.
RELEASE = """
if redis.call('XACK', KEYS[3], ARGV[2], ARGV[1]) == 0 then return 0 end
redis.call('XDEL', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[5], ARGV[3] .. ':' .. ARGV[4] .. ':' .. ARGV[8] .. ':' .. ARGV[6])
if ARGV[4] ~= '' and redis.call('EXISTS', KEYS[1]) == 1 then
    redis.call('HINCRBY', KEYS[1], 'stock:' .. ARGV[4], 1)
end
local taken = redis.call('HINCRBY', KEYS[2], ARGV[3], -1)
if taken <= 0 then redis.call('HDEL', KEYS[2], ARGV[3]) end
redis.call('HDEL', KEYS[5], ARGV[3] .. ':' .. ARGV[7])
return 1
"""

# How far past the database's highest reservation number a counter that Redis lost starts
# again: more reservations than can wait unwritten at once (they are bounded by a sale's
# stock and its draws), and 2**30 numbers per stock group leave room for a thousand such
# restarts.
LOST_NUMBERS_GAP = 1 << 20

# Load a group's state built from the database, unless a state is already there: live
# Redis state is never overwritten blindly (reconciliation repairs it field by field).
# Refused while reservations wait in the stream: the database does not hold them yet, so
# a state built from it would sell their units again (persist them first).
# The persisting consumer group is created from the stream's start, so that no entry
# appended before it existed is skipped.
# The reservation counter is raised to at least the highest number the database holds
# and the stream's last entry, so that a Redis that lost its keys never hands out an id
# that the database holds, and a new entry's id is always above the stream's last. With
# neither the counter nor the stream, nothing tells how far a lost Redis had counted past
# the database (its waiting reservations were answered 202 with their ids, and are gone
# with it): the counter starts LOST_NUMBERS_GAP above, so that no id names two reservations.
# KEYS[1] state, KEYS[2] takers, KEYS[3] pending stream, KEYS[4] reservation counter,
# KEYS[5] take numbers in use
# ARGV[1] consumer group, ARGV[2] the counter's floor, ARGV[3] the number of state
# fields s, ARGV[4] the number of takers t, then s name/value pairs of the state, then t
# user/takes pairs, then the take numbers in use as "<user>:<n>"
# Returns 1 when loaded, 0 when a state was already there, -1 while reservations wait.
LOAD = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 and redis.call('XLEN', KEYS[3]) > 0 then return -1 end
local s, t = tonumber(ARGV[3]), tonumber(ARGV[4])
local i = 5
for _ = 1, s do
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    i = i + 2
end
redis.call('DEL', KEYS[2], KEYS[5])
for _ = 1, t do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    i = i + 2
end
while i <= #ARGV do
    redis.call('HSET', KEYS[5], ARGV[i], 1)
    i = i + 1
end
local floor = tonumber(ARGV[2])
if redis.call('EXISTS', KEYS[3]) == 0 then
    if redis.call('EXISTS', KEYS[4]) == 0 then floor = floor + LOST_NUMBERS_GAP end
    redis.call('XGROUP', 'CREATE', KEYS[3], ARGV[1], '0', 'MKSTREAM')
else
    redis.pcall('XGROUP', 'CREATE', KEYS[3], ARGV[1], '0')
    local info = redis.call('XINFO', 'STREAM', KEYS[3])
    for i = 1, #info, 2 do
        if info[i] == 'last-generated-id' then
            floor = math.max(floor, tonumber(string.match(info[i + 1], '^(%d+)')))
        end
    end
end
if tonumber(redis.call('GET', KEYS[4]) or '0') < floor then
    redis.call('SET', KEYS[4], floor)
end
return 1
""".replace("LOST_NUMBERS_GAP", str(LOST_NUMBERS_GAP))

# Add units to one row (a restock), only where the state is loaded: a missing state is
# rebuilt from the database, which already holds the restock.
# KEYS[1] state
# ARGV[1] stock id, ARGV[2] units (may be negative for a correction)
# Returns the units left after, or false when no state is loaded.
ADD_UNITS = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return redis.call('HINCRBY', KEYS[1], 'stock:' .. ARGV[1], ARGV[2])
"""

# Change the rules of a loaded state (a new window, draw limit or weight of taking
# nothing), only where the state is loaded: a missing state is rebuilt from the database,
# which already holds the change.
# KEYS[1] state
# ARGV: name/value pairs of the rules (begin_ms, end_ms, limit, no_take)
# Returns 1 when changed, 0 when no state is loaded.
SET_RULES = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""

# Repair a live state by relative amounts, where it is loaded: reconciliation computes the
# amounts under the group's lock, and a reservation running meanwhile changes the state
# and the stream alike, so the amounts still hold when they are applied. The numbers marked
# that no take used when they were read are dropped: no reservation since can have taken one
# (a take marks a number that was free), and the marks count the takes again.
# KEYS[1] state, KEYS[2] takers, KEYS[3] take numbers in use
# ARGV[1] the number of stock changes s, ARGV[2] the number of taker changes t, ARGV[3] the
# number of unused take numbers u, then s stock id/units pairs, then t user/takes pairs,
# then u unused take numbers, then the take numbers missing, each as "<user>:<n>"
# Returns 1 when repaired, 0 when no state is loaded.
REPAIR = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local s, t, u = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local i = 4
for _ = 1, s do
    redis.call('HINCRBY', KEYS[1], 'stock:' .. ARGV[i], ARGV[i + 1])
    i = i + 2
end
for _ = 1, t do
    if redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1]) <= 0 then redis.call('HDEL', KEYS[2], ARGV[i]) end
    i = i + 2
end
for _ = 1, u do
    redis.call('HDEL', KEYS[3], ARGV[i])
    i = i + 1
end
while i <= #ARGV do
    redis.call('HSET', KEYS[3], ARGV[i], 1)
    i = i + 1
end
return 1
"""

# Return released records' units to a loaded state, and their takes to users whose release
# frees them (a voucher's buyer may buy again: number 1 is the only take such a product
# has): called once per batch of releases, after the database committed them, under the
# group's lock, so that reconciliation never reads one side changed and the other not. A
# missing state is rebuilt from the database, which holds the releases.
# KEYS[1] state, KEYS[2] takers, KEYS[3] take numbers in use
# ARGV[1] the number of stock rows s, then s stock id/units pairs, then the users whose
#         take is freed, one each time a take of theirs is
# Returns 1 when returned, 0 when no state is loaded.
RETURN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local s = tonumber(ARGV[1])
local i = 2
for _ = 1, s do
    redis.call('HINCRBY', KEYS[1], 'stock:' .. ARGV[i], ARGV[i + 1])
    i = i + 2
end
while i <= #ARGV do
    if redis.call('HINCRBY', KEYS[2], ARGV[i], -1) <= 0 then redis.call('HDEL', KEYS[2], ARGV[i]) end
    redis.call('HDEL', KEYS[3], ARGV[i] .. ':1')
    i = i + 1
end
return 1
"""
