"""The script that returns released records' units to a group's state in Redis (a module of
its own beside ``inventory.redis_lua.scripts``, whose ``STATE`` helpers it shares).

RETURN: released records' units back to a loaded state, their takes to users whose release
frees them (a voucher's buyer may buy again: number 1 is the only take such a product has),
and each releasing user's abandoned holds as the database counts them after the releases
(docs/design.md, "Abandoned holds"), which RESERVE checks the item's cap and cooldown against. Called
once per batch of releases, after the database committed them, under the group's lock, so
that reconciliation never reads one side changed and the other not; the abandoned holds are
the database's own figures, so a return that Redis missed is made whole by the next. A
missing state is rebuilt from the database, which holds the releases.
"""

from .scripts import STATE

# KEYS[1] state, KEYS[2] abandoned holds
# ARGV[1] the number of stock rows s, ARGV[2] the number of users a whose abandoned holds are
#         set, then s stock id/units pairs, then a user/value pairs ("<holds>:<ms>"), then the
#         users whose take is freed, one each time a take of theirs is
# Returns 1 when returned, 0 when no state is loaded.
RETURN = (
    STATE
    + """
local state = state_read(KEYS[1])
if not state then return 0 end
local s, a = tonumber(ARGV[1]), tonumber(ARGV[2])
local i = 3
for _ = 1, s do
    rows_add(state, ARGV[i], ARGV[i + 1])
    i = i + 2
end
for _ = 1, a do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    i = i + 2
end
while i <= #ARGV do
    local takes, used = marks_read(KEYS[1], ARGV[i])
    used[1] = nil
    marks_write(KEYS[1], state, ARGV[i], takes, takes - 1, used)
    i = i + 1
end
state_write(KEYS[1], state)
return 1
"""
)
