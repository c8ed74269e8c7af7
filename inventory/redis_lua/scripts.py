"""The Lua scripts of the ``redis_lua`` strategy, as named constants.

A stock group's state lives in Redis under one hash tag (``<ns>:res:{group:<id>}:...``,
``<ns>`` the instance namespace of ``core.namespace``), so that every script touches a
single Cluster slot (``docs/design.md``, "A reservation in Redis"):

- ``...:state``, a hash laid out so that RESERVE reads it with one ``HMGET`` and writes it
  with one ``HSET``; its numbers are big-endian doubles (``struct``: no text to parse or format). ``rules``: the
  layout, the sale window (ms), the takes per user (1 for a voucher, the draw limit for a pool), the weight of taking
  nothing (a pool's "no prize"), the cap on abandoned holds and the cooldown after each (ms; absent from a state
  loaded before they were: neither), the item's number of states, then the hold window (seconds, as text; none in a
  state loaded before it was), which RESERVE never reads. ``holds``: the windows of the reservations waiting when it
  changed (``inventory.redis_lua.windows``). ``live``: the group's last reservation number, every user's takes together
  (reconciliation's total), the units of the rows that have some, the Redis time (ms) until
  which the kick flag stands, then each row's stock id and units, ascending by id.
  ``<user id>``: the user's takes and the take numbers they use, ``<k>`` for k takes
  numbered 1 to k, else ``<k>:<n>,<n>,...`` (a number freed by an undone take, or takes
  that share one in the database); none for no take. A take gets the user's lowest free
  number: one undone frees its number (a draw's number is its per-user backstop in the
  database, and must not repeat). ``r:<user id>:<take number>``: that take's reservation
  number while it waits (deleted by its acknowledgement): a user's list reads by it, not the
  whole stream. A state is loaded while it has ``live``: one of an earlier layout
  (``stock:<id>``; ``...:takers``, ``...:seqs``, ``...:kick`` beside) is none: RESERVE
  answers ``unavailable`` (the caller asks for a rebuild), LOAD replaces it;
- ``...:abandoned``, a hash: user id -> ``<holds>:<ms>``, the user's abandoned holds of the
  item and when the last was released, as the database counts them (``Abandoned``): set by
  RETURN with each release's unit, written by a load; RESERVE refuses at the rules' cap, or
  within their cooldown of the last (docs/design.md, "Abandoned holds");
- ``...:checked``, a flag that expires: set by a reconciliation that found each user whole;
- ``...:pending``, a stream: one entry per reservation not yet persisted, read by the
  persisting worker through the consumer group ``persist``, its id ``<n>-0`` (n the
  reservation's number: found in one ``XRANGE``), its fields the user, the row taken ("" for nothing), the take's
  number, ``at`` (Redis ms) and ``rid`` (the request's id, or "");
- ``...:ids``, the reservation counter while no state is loaded: DROP leaves the state's
  there (a reservation's id is made of its group and number, ``values.reservation_id``);
- ``...:failed``, a hash: reservation number -> ``<user>:<stock id or "">:<ms>:<why>`` for a
  reservation that could not be persisted (undone: the record never existed); ``u:<user id>``
  -> those numbers of the user, each followed by a space (their list reads by it).

The kick flag: set by the reservation that found it lapsed, whose caller asks a worker to persist
the stream (a task per period); a drain holds it while it paces, then clears it, reads once more.

One take, any product (``inventory.strategies``): a voucher is a group of one row today, a
limit of 1 and no weight of taking nothing; a pool's choice is weighted by the stock left.
The rate limits of a request count in RESERVE's round trip: their counters
(``core.ratelimit``) are keys of the group's hash tag, ``<ns>:rate:{group:<id>}:...``.
"""

from core.ratelimit import RATE_WAIT

from ..admission.scripts import TICKET

# Reserve one unit for a user: count the request's rate limits; check the window (Redis time), the user's takes, their
# abandoned holds (the cap and the cooldown, where the rules carry them) and the stock; choose a row weighted by its
# stock (or nothing, by the weight of taking nothing); append the pending reservation, then write the state (the row's
# units, the counters, the user's take numbers) with one HSET. The append comes first: should it fail (an entry id not
# above the stream's last), nothing is taken. With an admission ticket (the room in the same Redis:
# ``inventory.admission.tickets.TicketHeld``), checked after the rate limits (a take refused for its ticket counts
# against them), before anything else, as a take that spends it apart does; spent by every answer but those that ask
# again and "not_started" (``tickets.GIVEN_BACK``), a unit counted used only if it took one.
# Every purchase and draw pays its cost, so it is written for it (docs/design.md): numbers packed, or made text with
# %d (tostring formats floats), text answered, one row spliced.
# KEYS[1] state, KEYS[2] pending stream, KEYS[3] abandoned holds, with a ticket KEYS[4..6] the
#         room's admitted, serials and room, then the request's rate-limit counters (if any)
# ARGV[1] user id, ARGV[2] a uniform random number in [0, 1) drawn by the caller (so that tests can seed it), ARGV[3]
#         the kick flag's lifetime in ms, ARGV[4] the request's id ("" for none), for the worker's log line, ARGV[5]
#         the number of states the caller's item is spread over (``Rules.states``), ARGV[6] the ticket's serial (""
#         for none), ARGV[7] the moment (ms) it is checked at ("" for Redis' clock: a test's), ARGV[8...] each
#         rate-limit counter's limit and window in ms, in pairs
# Returns "ok <stock id or ''> <seq> <n> <marks> <kick> <limit>", where seq is this take's number among the user's
# takes (the database's per-user backstop), n the reservation's number in the group, marks the user's field after it
# (its takes first), kick 1 when the caller should ask for the stream to be persisted, and limit the limit of takes it
# checked; or "rate_limited <ms to wait>" or "cooling_down <ms to wait>"; or a refusal: "unavailable" (no state: never
# sell from nothing), "moved" (the state is laid out for another number of states than the caller's: its item was read
# before a rebucket, and routed the user to a state that may not keep their takes), "not_admitted" (not the user's
# live ticket), "not_started", "ended", "limit", "abandon_limit", "sold_out".
RESERVE = (
    "local ticket, user, spend = ARGV[6], ARGV[1], false\nlocal first_rate = ticket ~= '' and 7 or 4\n"
    + "if #KEYS >= first_rate then\n"
    + RATE_WAIT
    + """
    local wait = rate_wait(first_rate, 8)
    if wait > 0 then return string.format('rate_limited %d', wait) end
end
local now = redis.call('TIME')
local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
if ticket ~= '' then
"""
    + TICKET
    + """
    local at = ARGV[7] == '' and now_ms or tonumber(ARGV[7])  -- a test's moment, or Redis' clock as the window's
    if not ticket_live(KEYS[4], KEYS[5], user, ticket, at) then return 'not_admitted' end
    spend = function(took) ticket_use(KEYS[4], KEYS[5], KEYS[6], user, took) end
end
local sub, format, pack, unpack = string.sub, string.format, struct.pack, struct.unpack
local got = redis.call('HMGET', KEYS[1], 'rules', 'live', user)
local live, marks = got[2], got[3]
if not live then return 'unavailable' end
if #got[1] > 56 and unpack('>d', got[1], 57) ~= tonumber(ARGV[5]) then return 'moved' end
local _, begin_ms, end_ms, limit, no_take = unpack('>ddddd', got[1])
local n, total, left, kick_at = unpack('>dddd', live)
if now_ms < begin_ms then return 'not_started' end
if now_ms >= end_ms then if spend then spend(false) end return 'ended' end
local seq, value = '1', '1'
if marks then
    local takes, listed = string.match(marks, '^(%d+)(.*)$')
    if takes + 0 >= limit then if spend then spend(false) end return 'limit' end
    value = format('%d', takes + 1)
    if listed == '' then
        seq = value
    else
        local used, count, top, free = {}, 0, 0, 1
        for m in string.gmatch(listed, '%d+') do
            m = m + 0
            used[m] = true
            count = count + 1
            if m > top then top = m end
        end
        while used[free] do free = free + 1 end
        seq = format('%d', free)
        if free > top then top = free end
        if takes + 0 ~= count or top ~= count + 1 then
            value = value .. ':' .. sub(listed, 2) .. (listed == ':' and '' or ',') .. seq
        end
    end
end
if #got[1] > 40 then
    local cap, cool = unpack('>dd', got[1], 41)
    local gave = (cap > 0 or cool > 0) and redis.call('HGET', KEYS[3], user)
    if gave then
        local holds, last = string.match(gave, '^(%d+):(%d+)$')
        if cap > 0 and holds + 0 >= cap then if spend then spend(false) end return 'abandon_limit' end
        if cool > 0 and now_ms < last + cool then return format('cooling_down %d', last + cool - now_ms) end
    end
end
if left <= 0 then if spend then spend(false) end return 'sold_out' end
local point = ARGV[2] * (left + no_take)
local chosen, rows = '', sub(live, 33)
for at = 33, #live, 16 do
    local id, units = unpack('>dd', live, at)
    if units > 0 then
        if point < units then
            chosen = format('%d', id)
            rows = sub(live, 33, at - 1) .. pack('>dd', id, units - 1) .. sub(live, at + 16)
            left = left - 1
            break
        end
        point = point - units
    end
end
local number = format('%d', n + 1)
redis.call('XADD', KEYS[2], number, 'user', user, 'stock', chosen, 'seq', seq, 'at', format('%d', now_ms),
           'rid', ARGV[4])
local kick = '0'
if now_ms >= kick_at then
    kick = '1'
    kick_at = now_ms + ARGV[3]
end
redis.call('HSET', KEYS[1], 'live', pack('>dddd', n + 1, total + 1, left, kick_at) .. rows, user, value,
           'r:' .. user .. ':' .. seq, number)
if spend then spend(chosen ~= '') end
return 'ok ' .. chosen .. ' ' .. seq .. ' ' .. number .. ' ' .. value .. ' ' .. kick .. ' ' .. format('%d', limit)
"""
)

# What the scripts other than RESERVE share: ``live`` read into a table (nil: no state) and
# written back, rows sorted and ``left`` summed again; a user's takes and numbers read and
# written back, the total of takes following.
STATE = """
local function state_read(key)
    local live = redis.call('HGET', key, 'live')
    if not live then return nil end
    local n, takes, _, kick_at = struct.unpack('>dddd', live)
    local rows = {}
    for at = 33, #live, 16 do
        local id, units = struct.unpack('>dd', live, at)
        rows[id] = units
    end
    return {n = n, takes = takes, kick_at = kick_at, rows = rows}
end

local function state_write(key, state)
    local ids, parts, left = {}, {}, 0
    for id in pairs(state.rows) do ids[#ids + 1] = id end
    table.sort(ids)
    for i, id in ipairs(ids) do
        local units = state.rows[id]
        if units > 0 then left = left + units end
        parts[i] = struct.pack('>dd', id, units)
    end
    local head = struct.pack('>dddd', state.n, state.takes, left, state.kick_at)
    redis.call('HSET', key, 'live', head .. table.concat(parts))
end

local function rows_add(state, id, units)
    id = tonumber(id)
    state.rows[id] = (state.rows[id] or 0) + tonumber(units)
    return state.rows[id]
end

local function marks_read(key, user)
    local value = redis.call('HGET', key, user)
    local used = {}
    if not value then return 0, used end
    local takes, listed = string.match(value, '^(%d+)(.*)$')
    takes = tonumber(takes)
    if listed == '' then
        for n = 1, takes do used[n] = true end
    else
        for n in string.gmatch(listed, '%d+') do used[tonumber(n)] = true end
    end
    return takes, used
end

local function marks_write(key, state, user, before, takes, used)
    if takes < 0 then takes = 0 end
    state.takes = state.takes + takes - before
    local numbers = {}
    for n in pairs(used) do numbers[#numbers + 1] = n end
    table.sort(numbers)
    if takes == 0 and #numbers == 0 then
        redis.call('HDEL', key, user)
    elseif #numbers == takes and numbers[takes] == takes then
        redis.call('HSET', key, user, string.format('%d', takes))
    else
        for i, n in ipairs(numbers) do numbers[i] = string.format('%d', n) end
        redis.call('HSET', key, user, string.format('%d:', takes) .. table.concat(numbers, ','))
    end
end
"""

# Undo a reservation that could not be persisted for good, once: only while its stream entry is unacknowledged by
# the persisting group (no second undo, none after a persist); its take's number freed, and the user's list's field.
# KEYS[1] state, KEYS[2] pending stream, KEYS[3] failed reservations
# ARGV[1] stream entry id, ARGV[2] consumer group, ARGV[3] user id,
# ARGV[4] stock id or "" (a take of nothing), ARGV[5] reservation number, ARGV[6] why,
# ARGV[7] the take's number, ARGV[8] when it was reserved (ms)
# Returns 1 when compensated, 0 when there was nothing to undo.
RELEASE = (
    STATE
    + """
if redis.call('XACK', KEYS[2], ARGV[2], ARGV[1]) == 0 then return 0 end
redis.call('XDEL', KEYS[2], ARGV[1])
local mine = 'u:' .. ARGV[3]
redis.call('HSET', KEYS[3], ARGV[5], ARGV[3] .. ':' .. ARGV[4] .. ':' .. ARGV[8] .. ':' .. ARGV[6],
           mine, (redis.call('HGET', KEYS[3], mine) or '') .. ARGV[5] .. ' ')
local state = state_read(KEYS[1])
if state then
    if ARGV[4] ~= '' then rows_add(state, ARGV[4], 1) end
    local taken = 'r:' .. ARGV[3] .. ':' .. ARGV[7]
    if redis.call('HGET', KEYS[1], taken) == ARGV[5] then redis.call('HDEL', KEYS[1], taken) end
    local takes, used = marks_read(KEYS[1], ARGV[3])
    used[tonumber(ARGV[7])] = nil
    marks_write(KEYS[1], state, ARGV[3], takes, takes - 1, used)
    state_write(KEYS[1], state)
end
return 1
"""
)

# Load a group's state built from the database, unless one is there (reconciliation repairs a live one field by field;
# an earlier layout's is none, and replaced). Refused while reservations wait in the stream: the database does not
# hold them yet, so a state built from it would sell their units again (persist them first). The persisting consumer
# group is created from the stream's start, so that no entry appended before it existed is skipped. The counter starts
# at the highest of the database's last number, the one a dropped state left (``...:ids``) and the stream's last
# entry: no id the database holds is handed out again, and a new entry's id is above the stream's last. With neither
# ``...:ids`` nor the stream the counter is lost, with the reservations the lost Redis answered 202 and the database
# may hold none of (lost twice before one was written): it answers -2 unless ARGV[7] gives the floor to start from,
# which the caller wrote to the database first, above every number an earlier load could have handed out
# (``inventory.redis_lua.numbering``).
# KEYS[1] state, KEYS[2] pending stream, KEYS[3] the kept counter, KEYS[4] takers, KEYS[5]
# take numbers and KEYS[6] kick flag of the earlier layout
# ARGV[1] consumer group, ARGV[2] the counter's floor, ARGV[3] the rules field, ARGV[4] the
# rows of ``live`` (packed, ascending), ARGV[5] the takes of every user together, ARGV[6] the
# units left, ARGV[7] a lost counter's floor (or ""), then user/field pairs (takes, numbers)
# Returns 1 when loaded, 0 when a state was already there, -1 while reservations wait, -2
# when the counter is lost and ARGV[7] is "" (nothing loaded).
LOAD = """
if redis.call('HEXISTS', KEYS[1], 'live') == 1 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 and redis.call('XLEN', KEYS[2]) > 0 then return -1 end
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5], KEYS[6])
local floor = tonumber(ARGV[2])
local kept = redis.call('GET', KEYS[3])
if redis.call('EXISTS', KEYS[2]) == 0 then
    if not kept and ARGV[7] == '' then return -2 end
    if not kept then floor = math.max(floor, tonumber(ARGV[7])) end
    redis.call('XGROUP', 'CREATE', KEYS[2], ARGV[1], '0', 'MKSTREAM')
else
    redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[1], '0')
    local info = redis.call('XINFO', 'STREAM', KEYS[2])
    for i = 1, #info, 2 do
        if info[i] == 'last-generated-id' then
            floor = math.max(floor, tonumber(string.match(info[i + 1], '^(%d+)')))
        end
    end
end
floor = math.max(floor, tonumber(kept or '0'))
local live = struct.pack('>dddd', floor, tonumber(ARGV[5]), tonumber(ARGV[6]), 0) .. ARGV[4]
redis.call('HSET', KEYS[1], 'rules', ARGV[3], 'live', live)
for i = 8, #ARGV, 1000 do
    redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return 1
"""

# Remove the group's state (RESERVE answers ``unavailable`` from then on), with what an
# earlier layout left, keeping its reservation counter in ``...:ids`` for the next LOAD.
# KEYS[1] state, KEYS[2] the kept counter, KEYS[3] takers, KEYS[4] take numbers and KEYS[5]
# kick flag of the earlier layout
DROP = """
local live = redis.call('HGET', KEYS[1], 'live')
if live then
    local n = struct.unpack('>d', live)
    if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], string.format('%d', n)) end
end
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4], KEYS[5])
return 1
"""

# Hold the kick flag for ARGV[1] ms from now, or clear it (ARGV[1] ""), where a state is
# loaded. KEYS[1] state. Returns 1 when set, 0 when no state is loaded.
KICK = """
local live = redis.call('HGET', KEYS[1], 'live')
if not live then return 0 end
local until_ms = 0
if ARGV[1] ~= '' then
    local now = redis.call('TIME')
    until_ms = now[1] * 1000 + math.floor(now[2] / 1000) + ARGV[1]
end
local n, takes, left = struct.unpack('>ddd', live)
redis.call('HSET', KEYS[1], 'live', struct.pack('>dddd', n, takes, left, until_ms) .. string.sub(live, 33))
return 1
"""

# Add units to one row (a restock, or a new row), only where the state is loaded: a
# missing state is rebuilt from the database, which already holds the restock.
# KEYS[1] state; ARGV[1] stock id, ARGV[2] units (may be negative for a correction)
# Returns the units left after, or false when no state is loaded.
ADD_UNITS = (
    STATE
    + """
local state = state_read(KEYS[1])
if not state then return false end
local left = rows_add(state, ARGV[1], ARGV[2])
state_write(KEYS[1], state)
return left
"""
)

# Repair a live state by relative amounts, where it is loaded: reconciliation computes the
# amounts under the group's lock, and a reservation running meanwhile changes the state
# and the stream alike, so the amounts still hold when they are applied. The numbers marked
# that no take used when they were read are dropped: no reservation since can have taken one
# (a take marks a number that was free).
# KEYS[1] state
# ARGV[1] the number of stock changes s, ARGV[2] the number of taker changes t, ARGV[3] the
# number of unused take numbers u, then s stock id/units pairs, then t user/takes pairs,
# then u unused take numbers, then the take numbers missing, each as "<user>:<n>"
# Returns 1 when repaired, 0 when no state is loaded.
REPAIR = (
    STATE
    + """
local state = state_read(KEYS[1])
if not state then return 0 end
local s, t, u = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local i = 4
for _ = 1, s do
    rows_add(state, ARGV[i], ARGV[i + 1])
    i = i + 2
end
local users = {}
local function user_of(user)
    if not users[user] then
        local takes, used = marks_read(KEYS[1], user)
        users[user] = {before = takes, takes = takes, used = used}
    end
    return users[user]
end
for _ = 1, t do
    local one = user_of(ARGV[i])
    one.takes = one.takes + tonumber(ARGV[i + 1])
    i = i + 2
end
for j = i, #ARGV do
    local user, n = string.match(ARGV[j], '^(%d+):(%d+)$')
    user_of(user).used[tonumber(n)] = j >= i + u or nil  -- the unused dropped, the missing marked
end
for user, one in pairs(users) do marks_write(KEYS[1], state, user, one.before, one.takes, one.used) end
state_write(KEYS[1], state)
return 1
"""
)
