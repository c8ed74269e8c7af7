"""The Lua scripts behind every lock, as named constants.

Each script runs atomically in Redis. All keys of one resource share a hash tag
(``lock:{name}...``), so every script touches a single Cluster slot; the wake key
is built inside RELEASE from ``ARGV`` for that reason only, and lies in the same slot.

A waiter entry in the queue is ``"<token>:<lease_ms>"`` so that a hand-off gives
the next holder its own lease. A hand-off holds the key for a claim (``CLAIM``), which the
woken waiter takes up for its lease with its next ACQUIRE before it holds anything: a
waiter killed outright (SIGKILL), whose entry no one can remove, then holds the lock unused
for the claim, not for a lease.
"""

# How long a lock handed to a waiter is held for it until it wakes and takes it up: a
# second, or a third of the waiter's lease and half a second, whichever is longer, and never
# longer than the lease. Far longer than a live waiter's wake; and a waiter of an earlier
# version, which holds a hand-off as a lease and first renews it a third of the lease on,
# keeps it while a deployment replaces the processes. A waiter that wakes later than its
# claim finds it lapsed, and its ACQUIRE queues it again.
HANDOFF_CLAIM_MS = 1000
CLAIM = f"""
local function claim_ms(lease)
    return math.min(lease, math.max({HANDOFF_CLAIM_MS}, math.floor(lease / 3) + 500))
end
"""

# Take the lock when it is free.
# KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] waiter queue, KEYS[4] this caller's wake key
# ARGV[1] owner token, ARGV[2] lease in ms, ARGV[3] this caller's queue entry
#         ("" for a caller that never queues), ARGV[4] "1" on a first attempt, "0" once
#         queued (leave the queue if the lock is taken)
# A busy lock appends the entry unless it is queued already: a first attempt sent again (a
# client that retries a call whose answer was lost) queues no second entry, and one whose
# entry a hand-off took, its claim lapsed before it was taken up, is queued again.
# Returns {1, fence} when taken, or already ours (handed over: its claim taken up for the
# lease, with a fence of its own, above the one the hand-off pushed to wake the caller, which
# a wait sent again may have lost; the wake key emptied); else {0, pttl of the holder}.
ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    if ARGV[4] == '0' then redis.call('LREM', KEYS[3], 1, ARGV[3]) end
    return {1, redis.call('INCR', KEYS[2])}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    redis.call('DEL', KEYS[4])
    return {1, redis.call('INCR', KEYS[2])}
end
if ARGV[3] ~= '' and not redis.call('LPOS', KEYS[3], ARGV[3]) then
    redis.call('RPUSH', KEYS[3], ARGV[3])
end
return {0, redis.call('PTTL', KEYS[1])}
"""

# Release the lock, handing it straight to the first waiter if there is one.
# KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] waiter queue
# ARGV[1] owner token
# ARGV[2] prefix of the waiters' wake keys (the waiter's token is appended)
# ARGV[3] this caller's own queue entry when it gives up waiting, else ""
# Returns 0 when the caller did not hold the lock (never did, or its lease
# expired), 1 when released with nobody waiting, 2 when handed to a waiter.
RELEASE = (
    CLAIM
    + """
if ARGV[3] ~= '' and redis.call('LREM', KEYS[3], 1, ARGV[3]) == 1 then
    return 0
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
local entry = redis.call('LPOP', KEYS[3])
if entry then
    local sep = string.find(entry, ':', 1, true)
    local token, lease = string.sub(entry, 1, sep - 1), string.sub(entry, sep + 1)
    local wake = ARGV[2] .. token
    redis.call('SET', KEYS[1], token, 'PX', claim_ms(tonumber(lease)))
    redis.call('RPUSH', wake, redis.call('INCR', KEYS[2]))
    redis.call('PEXPIRE', wake, lease)
    return 2
end
redis.call('DEL', KEYS[1])
return 1
"""
)

# Renew the lease if the lock is still ours.
# KEYS[1] lock key; ARGV[1] owner token, ARGV[2] lease in ms
# Returns 1 when renewed, 0 when the lock is no longer ours.
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
end
return 0
"""

# All-or-nothing acquisition of many locks. Only the lock keys are passed: each
# one's fence counter is the key plus ":fence", in the same hash slot by its tag.
# KEYS[1..n] lock keys; ARGV[1] owner token, ARGV[2] lease in ms
# Returns {1, fence_1, ..., fence_n} when every key was free and is now ours,
# else {0, index of the first busy key, its pttl}; the keys taken before the busy
# one are deleted again in the same script, so nothing is held then. (Their fence
# counters have moved on: fences may skip numbers, never repeat or go back.)
ACQUIRE_MANY = """
local result = {1}
for i = 1, #KEYS do
    if not redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
        for j = 1, i - 1 do
            redis.call('DEL', KEYS[j])
        end
        return {0, i, redis.call('PTTL', KEYS[i])}
    end
    result[i + 1] = redis.call('INCR', KEYS[i] .. ':fence')
end
return result
"""

# Release many locks held under one token, handing each to its first waiter.
# Only the lock keys are passed; queue, fence and wake keys derive from each
# (same hash slot).
# KEYS[1..n] lock keys; ARGV[1] owner token
# Returns how many were ours (the rest had expired and are left alone).
RELEASE_MANY = (
    CLAIM
    + """
local released = 0
for i = 1, #KEYS do
    local key = KEYS[i]
    if redis.call('GET', key) == ARGV[1] then
        released = released + 1
        local entry = redis.call('LPOP', key .. ':queue')
        if entry then
            local sep = string.find(entry, ':', 1, true)
            local token, lease = string.sub(entry, 1, sep - 1), string.sub(entry, sep + 1)
            local wake = key .. ':wake:' .. token
            redis.call('SET', key, token, 'PX', claim_ms(tonumber(lease)))
            redis.call('RPUSH', wake, redis.call('INCR', key .. ':fence'))
            redis.call('PEXPIRE', wake, lease)
        else
            redis.call('DEL', key)
        end
    end
end
return released
"""
)

# Renew many locks held under one token.
# KEYS[1..n] lock keys; ARGV[1] owner token, ARGV[2] lease in ms
# Returns how many are still ours and were renewed.
RENEW_MANY = """
local renewed = 0
for i = 1, #KEYS do
    if redis.call('GET', KEYS[i]) == ARGV[1] then
        redis.call('PEXPIRE', KEYS[i], ARGV[2])
        renewed = renewed + 1
    end
end
return renewed
"""

# Redlock, per server: take the key if free and count an acquisition.
# KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] owner token, ARGV[2] lease in ms
# Returns the server's fence counter after the increment, or 0 when the key is busy.
REDLOCK_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('INCR', KEYS[2])
end
return 0
"""

# Redlock, per server: raise the fence counter to at least ARGV[1], so that any later
# quorum, which overlaps this one in at least one server, counts past it.
# KEYS[1] fence counter; ARGV[1] the fence chosen for this acquisition. Returns 1.
REDLOCK_RAISE_FENCE = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then
    redis.call('SET', KEYS[1], ARGV[1])
end
return 1
"""

# Move a held lock's fence counter past a floor: after Redis lost the counter (restarted
# empty), the fences it hands out start again from 1, below those already written.
# KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] owner token, ARGV[2] the floor
# Returns the holder's new fence (above the floor and every fence counted), or 0 when the
# lock is not held by that token.
RAISE_FENCE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if current < tonumber(ARGV[2]) then
    redis.call('SET', KEYS[2], ARGV[2])
end
return redis.call('INCR', KEYS[2])
"""

# Redlock, per server: raise the fence counter to at least ARGV[2] if the key holds the
# token ARGV[1] (RAISE_FENCE for one server of a quorum).
# KEYS[1] lock key, KEYS[2] fence counter. Returns 1 when raised, 0 when not held.
REDLOCK_RAISE_HELD_FENCE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if current < tonumber(ARGV[2]) then
    redis.call('SET', KEYS[2], ARGV[2])
end
return 1
"""

# Redlock, per server: delete the key if it holds the token.
# KEYS[1] lock key; ARGV[1] owner token. Returns 1 when deleted, else 0.
REDLOCK_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""

# -- the read-write lock (locking.shared, locking.exclusive) ----------------------------------
#
# One resource's keys, under one hash tag: the exclusive holder's key (its token, with its
# lease as the key's expiry), the shared holders (a sorted set: token -> the end of its lease
# in ms of Redis' clock, so that holders in any process share one clock), the flag of a
# waiting exclusive caller (its token, expiring unless it keeps asking) and the fence counter.
# A shared holder whose lease ended is dropped by the next script that reads the set.

# Take a shared holding when no exclusive holder holds or waits and fewer than the limit do.
# KEYS[1] exclusive key, KEYS[2] shared holders, KEYS[3] waiting flag, KEYS[4] fence counter
# ARGV[1] token, ARGV[2] lease in ms, ARGV[3] the most shared holders at once
# Returns {1, fence} when taken, else {0, ms after which the obstacle ends at the latest}.
SHARED_ACQUIRE = """
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local exclusive = redis.call('PTTL', KEYS[1])
if exclusive ~= -2 then return {0, exclusive} end
local wanted = redis.call('PTTL', KEYS[3])
if wanted ~= -2 then return {0, wanted} end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
    local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {0, tonumber(first[2]) - now}
end
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], now + lease, ARGV[1])
if redis.call('PTTL', KEYS[2]) < lease then redis.call('PEXPIRE', KEYS[2], lease) end
return {1, redis.call('INCR', KEYS[4])}
"""

# Renew a shared holding whose lease has not ended.
# KEYS[1] shared holders; ARGV[1] token, ARGV[2] lease in ms
# Returns 1 when renewed, 0 when the holding is gone (its lease ended, or an exclusive caller
# found it ended and dropped it).
SHARED_RENEW = """
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
return 1
"""

# Release a shared holding.
# KEYS[1] shared holders; ARGV[1] token
# Returns 1 when released, 0 when it was not held any more (its lease had ended).
SHARED_RELEASE = """
local clock = redis.call('TIME')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', clock[1] * 1000 + math.floor(clock[2] / 1000))
return redis.call('ZREM', KEYS[1], ARGV[1])
"""

# How many shared holders hold now (leases not ended), and whether an exclusive caller holds
# or waits. Reads only.
# KEYS[1] shared holders, KEYS[2] exclusive key, KEYS[3] waiting flag
# Returns {holders, 1 when an exclusive caller holds or waits else 0}.
SHARED_COUNT = """
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local exclusive = redis.call('EXISTS', KEYS[2]) + redis.call('EXISTS', KEYS[3])
return {redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf'), math.min(exclusive, 1)}
"""

# Take the exclusive holding when nobody holds, shared or exclusive; else, when asked to,
# raise the waiting flag (or keep it up), so that no new shared holding is taken meanwhile.
# KEYS[1] exclusive key, KEYS[2] shared holders, KEYS[3] waiting flag, KEYS[4] fence counter
# ARGV[1] token, ARGV[2] lease in ms, ARGV[3] how long the flag stands in ms ("" for a caller
# that does not wait)
# Returns {1, fence} when taken, else {0, ms after which the obstacle ends at the latest}.
EXCLUSIVE_ACQUIRE = """
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local exclusive = redis.call('PTTL', KEYS[1])
if exclusive == -2 and redis.call('ZCARD', KEYS[2]) == 0 then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
    return {1, redis.call('INCR', KEYS[4])}
end
if ARGV[3] ~= '' then
    local waiting = redis.call('GET', KEYS[3])
    if not waiting or waiting == ARGV[1] then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3]) end
end
if exclusive ~= -2 then return {0, exclusive} end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
return {0, tonumber(last[2]) - now}
"""

# Release the exclusive holding, or a waiting caller's flag when it gives up.
# KEYS[1] exclusive key, KEYS[2] waiting flag; ARGV[1] token
# Returns 1 when the holding was released, else 0 (it was not ours any more).
EXCLUSIVE_RELEASE = """
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return 1
end
return 0
"""
