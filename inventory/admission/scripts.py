"""The waiting room's Lua scripts, one per step, each atomic on the item's keys
(``inventory.admission.keys.RoomKeys``: one hash tag, so one Cluster slot).

The keys of one item's room:

* ``line``: a sorted set of the users waiting, scored by their place. A user who joins before
  the sale opens (the lobby) is scored by a random number in [0, 1) that the caller draws;
  one who joins after, by the room's next arrival number (1, 2, ...) plus 1, so after the
  whole lobby and in order of arrival. The lobby is thereby shuffled at the opening without
  any work at the opening: no one learns their place until then.
* ``admitted``: a sorted set of the users admitted whose ticket is neither used nor lapsed,
  scored by the ticket's deadline (ms); and as ``~<user>``, those whose ticket a take spent in
  a call of its own and has not ended (``TICKET_SPEND``): still promising their unit.
* ``serials``: a hash, user -> the serial of that user's ticket; the signed ticket names it, so
  that a ticket used, lapsed, replaced or given by a room that Redis lost is refused.
* ``room``: a hash of the room's counters: ``arrivals``, ``issued`` (the last ticket's serial,
  counted from a random number), ``used`` (tickets spent on a take that took a unit, or may have), ``credit``
  and ``last`` (the rate's token bucket, in admissions and ms), ``units``, ``units_ms`` and
  ``used_base`` (the last reading of the units left, when it was read, and ``used`` then).

The units left to admit for are the last reading less the tickets used since and the tickets
still out: a unit is promised to one admitted buyer at most, so admission stops when the stock
is gone and a unit that comes back (a cancel, an expiry) admits the next buyer.

Every moment a room reads or writes (a ticket's deadline, the rate's last move, a ticket's
lapse, the units' reading) is Redis' clock (``TIME``), one for every web process: by each
process's own, one whose clock ran fast dropped the others' live tickets as lapsed, handed
out longer deadlines and moved the rate's last move into the future. A test may give the
moment instead (``now``), never a web process.
"""

from core.ratelimit import RATE_WAIT
from core.redis_script import CLOCK_MS

# Count the join's or poll's rate limits, where they live in the room's Redis, then advance the
# room to ``now``, join the user to its line if asked, and say where the user stands.
#
# KEYS: line, admitted, serials, room, then the rate limits' counters (none when not counted here)
# ARGV: now (ms; "" for Redis' clock), opens (ms), rate (per second), burst (admissions),
#       ticket (ms), units (the units left as read, or -1 when not read), units_ms (when they
#       were read, by Redis' clock),
#       user, join (1 to join, 0 to poll), lobby_score (a random number in [0, 1)),
#       serial_base (a random number of 50 bits: where a new room's ticket serials start),
#       expires (ms: when the room's keys go, the sale's end and a ticket's lifetime past it),
#       used (the room's ``used`` as read just before the units),
#       then each counter's limit and window (ms) (core.ratelimit)
#
# Returns {5, ms to wait} when a rate limit refused the call, the room not moved; {6, now}
# once the sale has ended (``expires`` less a ticket's lifetime), the room not moved; otherwise
# {state, rank, size, serial, deadline, credit, blocked, now}: state 1 waiting, 2 admitted, 3 sold
# out, 4 not in the line; rank the user's 0-based place among those waiting (-1 when
# not waiting or still in the lobby); size how many wait; serial and deadline the ticket's
# (admitted); credit the admissions due now, as a string (for the estimated wait); blocked,
# while every unit left is promised to a ticket still out, the first of their deadlines (ms:
# the earliest a unit comes free for the line, unless one comes back), else 0; now the moment
# (ms) the room moved to.
ADVANCE = (
    RATE_WAIT
    + CLOCK_MS
    + """
if #KEYS > 4 then
  local wait = rate_wait(5, 14)
  if wait > 0 then return {5, wait} end
end
local now, opens = ARGV[1] == '' and clock_ms() or tonumber(ARGV[1]), tonumber(ARGV[2])
local rate, burst, ticket_ms = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local units_read, units_ms = tonumber(ARGV[6]), tonumber(ARGV[7])
local user, join, expires = ARGV[8], ARGV[9] == '1', ARGV[12]
if now >= tonumber(expires) - ticket_ms then return {6, now} end
local room = KEYS[4]
local held = redis.call('HMGET', room, 'used', 'units_ms', 'units', 'used_base', 'last', 'credit', 'expires')
local used = tonumber(held[1] or '0')
local units, used_base = tonumber(held[3] or '0'), tonumber(held[4] or '0')
if units_read >= 0 and units_ms > tonumber(held[2] or '-1') then
  -- ``used`` as it stood before the units were read: a take that spent its ticket and its unit
  -- between that reading and this move is counted used since, not lost in the base.
  -- Never above the room's own: a room that Redis lost counts from 0 again, and a reading made
  -- before carries the count of the room lost.
  units, used_base = units_read, math.min(tonumber(ARGV[13]), used)
  redis.call('HSET', room, 'units', units, 'units_ms', units_ms, 'used_base', used_base)
end
units = units - (used - used_base)
-- Lapsed tickets: the units they promised go to the next in line. Their serials go in slices:
-- Lua's unpack refuses a few thousand values at once.
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for i = 1, #lapsed, 1000 do
  redis.call('HDEL', KEYS[3], unpack(lapsed, i, math.min(i + 999, #lapsed)))
end
if #lapsed > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
end
-- A joiner joins before the rate moves: one who finds admissions due and nobody ahead is
-- admitted by the join itself, with nothing to wait for.
local joining = join and not redis.call('ZSCORE', KEYS[2], user) and not redis.call('ZSCORE', KEYS[1], user)
if joining then
  local score = ARGV[10]
  if now >= opens then
    score = redis.call('HINCRBY', room, 'arrivals', 1) + 1
  end
  redis.call('ZADD', KEYS[1], score, user)
  redis.call('PEXPIREAT', KEYS[1], expires)
end
local credit, room_left = 0, units
if now >= opens then
  local last = tonumber(held[5] or '-1')
  local banked = tonumber(held[6] or '0')
  if last < 0 then
    -- The rate's first move after the opening: a lobby has waited since the opening; a line
    -- of no one but this joiner banks one admission, for that first joiner, and not more, or
    -- the first joiners would all be admitted at once.
    last = opens
    if redis.call('ZCARD', KEYS[1]) <= (joining and 1 or 0) then last, banked = now, 1 end
  end
  last = math.max(last, opens)
  credit = math.min(burst, banked + (now - last) * rate / 1000)
  room_left = units - redis.call('ZCARD', KEYS[2])
  local n = math.min(math.floor(credit), room_left)
  if n > 0 then
    -- Serials count from a random number of 50 bits, not from 1: a room that Redis lost
    -- numbers its tickets afresh from another, so no ticket of the lost room, used or not,
    -- names a live admission again (the numbers of two rooms of a million tickets each
    -- overlap by a chance of about two in a billion).
    redis.call('HSETNX', room, 'issued', ARGV[11])
    local heads = redis.call('ZPOPMIN', KEYS[1], n)
    for i = 1, #heads, 2 do
      local serial = redis.call('HINCRBY', room, 'issued', 1)
      redis.call('ZADD', KEYS[2], now + ticket_ms, heads[i])
      redis.call('HSET', KEYS[3], heads[i], serial)
    end
    redis.call('PEXPIREAT', KEYS[2], expires)
    redis.call('PEXPIREAT', KEYS[3], expires)
    credit = credit - #heads / 2
    room_left = room_left - #heads / 2
  end
  redis.call('HSET', room, 'credit', tostring(credit), 'last', now)
end
-- The room's keys go a ticket's lifetime after the sale ends (a later end, set by staff,
-- moves them on): a site keeps no room of a sale that is over.
if held[7] ~= expires then
  redis.call('HSET', room, 'expires', expires)
  for i = 1, 4 do redis.call('PEXPIREAT', KEYS[i], expires) end  -- the room's own: not the counters
end
local deadline = redis.call('ZSCORE', KEYS[2], user)
if deadline then
  return {2, -1, redis.call('ZCARD', KEYS[1]), tonumber(redis.call('HGET', KEYS[3], user)), tonumber(deadline),
          tostring(credit), 0, now}
end
local rank = redis.call('ZRANK', KEYS[1], user)
local size = redis.call('ZCARD', KEYS[1])
if not rank then
  return {4, -1, size, 0, 0, tostring(credit), 0, now}
end
if now < opens then
  return {1, -1, size, 0, 0, tostring(credit), 0, now}
end
if units <= 0 then
  return {3, rank, size, 0, 0, tostring(credit), 0, now}
end
local blocked = 0
if room_left <= 0 then
  blocked = tonumber(redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2] or '0')
end
return {1, rank, size, 0, 0, tostring(credit), blocked, now}
"""
)

# A ticket checked and spent, shared by TICKET_SPEND and by the script of a take that spends
# it in its own round trip (``inventory.redis_lua.scripts.RESERVE``):
# ``ticket_live(admitted, serials, user, serial, now)`` is the ticket's deadline (ms) when
# ``serial`` is the ticket the room last gave the user and ``now`` (ms) is before its deadline,
# else false; ``ticket_use(admitted, serials, room, user, took)`` spends it: it promises no unit
# any more, and, where its take took one (``took``), one more unit is counted used (a take
# refused for good, or a draw of no prize, took none: the room's units are as they were).
TICKET = """
local function ticket_live(admitted, serials, user, serial, now)
  local deadline = redis.call('ZSCORE', admitted, user)
  if not deadline or tonumber(deadline) <= now or redis.call('HGET', serials, user) ~= serial then
    return false
  end
  return tonumber(deadline)
end
local function ticket_use(admitted, serials, room, user, took)
  redis.call('ZREM', admitted, user)
  redis.call('HDEL', serials, user)
  if took then redis.call('HINCRBY', room, 'used', 1) end
end
"""

# Spend the user's ticket on a take, in a round trip of its own, and count the take's rate
# limits in it where they live in the room's Redis: a take of a strategy that counts them
# before it takes (core.ratelimit.COUNT) then makes one round trip for both. They are counted
# before the ticket is checked, as on an item without a room: a take refused for its ticket
# (spent, lapsed, replaced) counts too, or a client could send one spent ticket without
# limit. Spent before its take, it stays out, promising its unit, as ``~<user>`` in
# ``admitted`` until its take ends (TICKET_DONE, TICKET_RETURN): counted used at once, a
# reading of the units made before the take's commit found its unit left and the ticket used,
# and promised the unit to another buyer. Scored by the later of its deadline and the longest
# a take may run from now: a take begun a moment before the deadline still promises its unit
# while it runs, and one that never ends (its process died) lets it lapse then.
#
# KEYS: admitted, serials, room, then the rate limits' counters (none when not counted here)
# ARGV: user, serial, now (ms; "" for Redis' clock), the longest a take runs (ms), then each
#       counter's limit and window (ms) (core.ratelimit)
#
# Returns the ticket's deadline (ms) when it was spent; 0 when it was not the user's live
# one; minus the ms to wait when a rate limit refused the take, the ticket left unspent.
TICKET_SPEND = (
    TICKET
    + RATE_WAIT
    + CLOCK_MS
    + """
local wait = rate_wait(4, 5)
if wait > 0 then
  return -wait
end
local now = ARGV[3] == '' and clock_ms() or tonumber(ARGV[3])
local deadline = ticket_live(KEYS[1], KEYS[2], ARGV[1], ARGV[2], now)
if not deadline then
  return 0
end
ticket_use(KEYS[1], KEYS[2], KEYS[3], ARGV[1], false)
redis.call('ZADD', KEYS[1], math.max(deadline, now + tonumber(ARGV[4])), '~' .. ARGV[1])
-- Made again when it was the only member (its ZREM deleted the key): it goes with the room.
local ttl = redis.call('PTTL', KEYS[3])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return deadline
"""
)

# A ticket spent by TICKET_SPEND, its take ended for good: it promises no unit any more, and
# where the take took one (or may have: its outcome unknown), one more unit is counted used.
#
# KEYS: admitted, room
# ARGV: user, took (1 or 0)
TICKET_DONE = """
redis.call('ZREM', KEYS[1], '~' .. ARGV[1])
if ARGV[2] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('HINCRBY', KEYS[2], 'used', 1) end
return 1
"""

# Give a spent ticket back: its take was refused with nothing done and asks to be sent again
# (busy, rate limited, unavailable). Only until its deadline, and only if the user holds no
# other ticket meanwhile and has not joined the line again (one admission, or one place, per
# user), and while the room is there (gone after the sale, nothing is made again without its
# expiry). Its keys, emptied by the spend and written again here, go with the room's.
#
# KEYS: admitted, serials, room, line
# ARGV: user, serial, deadline (ms), now (ms; "" for Redis' clock)
#
# Returns 1 when the ticket is good again, 0 otherwise.
TICKET_RETURN = (
    CLOCK_MS
    + """
local now = ARGV[4] == '' and clock_ms() or tonumber(ARGV[4])
redis.call('ZREM', KEYS[1], '~' .. ARGV[1])
if tonumber(ARGV[3]) <= now or redis.call('ZSCORE', KEYS[1], ARGV[1])
    or redis.call('ZSCORE', KEYS[4], ARGV[1]) or redis.call('EXISTS', KEYS[3]) == 0 then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local ttl = redis.call('PTTL', KEYS[3])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
"""
)
