"""The Lua scripts that move units between the states of a bucketed ``redis_lua`` item, as
named constants (``docs/design.md``, "Buckets"; the client is ``inventory.redis_lua.transfers``).

Each bucket of such an item has its own state in its own slot (``values.state_id``), so no
script can touch two of them: a move is three steps, each one script in one slot, and a
move stopped between any two of them is finished or undone by a recovery that reads the
outboxes, without losing or doubling a unit.

- ``...:outbox`` of the giving state, a hash: transfer id -> ``<receiver state id> <epoch>
  <ms> <units> <row id>:<units>,...``, written by TRANSFER_OUT in the same script that takes
  the units from the giver's ``live``: a unit is always in some state's ``live`` or in an
  outbox entry, never nowhere.
- ``...:applied`` of the receiving state, a hash: transfer id -> ``applied <ms> <sent ms>``
  (the receiver's time of IN, and the giver's of OUT, which IN's staleness is measured from),
  written by TRANSFER_IN in the same script that adds the units: a second IN of the same
  transfer adds nothing. Kept after the move (pruned by the recovery once the receiver's own
  clock says an IN of it would be stale, and without its outbox entry), so that a recovery
  racing with the mover can only find it applied.
- ``moves``, a field of every state's hash, counts the steps of moves there (OUT and CANCEL
  in a giver, IN in a receiver), each in the script of the step: a reconciliation that read
  the states twice and found every count the same knows that no move ran at any state
  between its two reads of it (``inventory.redis_lua.reconcile_buckets``).
- ``epoch``, a field of every state's hash, written by the load of all the item's states
  together (a fresh value every time): IN refuses a transfer made under another epoch, so
  units taken from a state that a rebuild has since replaced never land in the rebuilt
  states, which count them already (the database still holds them in their row).

A moved unit keeps its row id: the receiver's ``live`` holds it as an entry of the giver's
row, a reservation made from it names that row, and persisting it decrements that row,
which still counts it. The database takes no part in a move.
"""

from core.redis_script import CLOCK_MS

from .scripts import STATE

# Take up to ARGV[3] units (at most half of the state's left, and at least one while it has
# any) from the giving state's rows and write them into its outbox, in one script.
# KEYS[1] the giving state, KEYS[2] its outbox
# ARGV[1] transfer id, ARGV[2] the receiving state's id, ARGV[3] the most units to move
# Returns "ok <epoch> <ms> <units> <row id>:<units>,..." (ms: Redis time of the move), or
# "none": no state, no epoch (not a bucketed item's state) or no units.
TRANSFER_OUT = (
    STATE
    + CLOCK_MS
    + """
local state = state_read(KEYS[1])
if not state then return 'none' end
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then return 'none' end
local left, ids = 0, {}
for id, units in pairs(state.rows) do
    if units > 0 then
        left = left + units
        ids[#ids + 1] = id
    end
end
if left <= 0 then return 'none' end
table.sort(ids)
local most = math.min(tonumber(ARGV[3]), math.max(1, math.floor(left / 2)))
local moved, parts = 0, {}
for _, id in ipairs(ids) do
    if moved >= most then break end
    local units = math.min(state.rows[id], most - moved)
    state.rows[id] = state.rows[id] - units
    moved = moved + units
    parts[#parts + 1] = string.format('%d:%d', id, units)
end
local at = string.format('%d', clock_ms())
local rows = table.concat(parts, ',')
local said = epoch .. ' ' .. at .. ' ' .. string.format('%d', moved) .. ' ' .. rows
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ' ' .. said)
state_write(KEYS[1], state)
redis.call('HINCRBY', KEYS[1], 'moves', 1)
return 'ok ' .. said
"""
)

# Add a transfer's units to the receiving state, once: as entries of the giver's rows.
# KEYS[1] the receiving state, KEYS[2] its applied marks
# ARGV[1] transfer id, ARGV[2] the epoch OUT answered, ARGV[3] OUT's time (ms), ARGV[4] the
# longest a transfer may take (ms), ARGV[5] the rows, "<row id>:<units>,..."
# Returns "applied" (by this call or an earlier one), or a refusal that no later call can
# turn: "unavailable" (no state: the next load writes another epoch), "epoch" (the state
# was loaded since the units left), "stale" (older than ARGV[4]: its mark may be pruned).
TRANSFER_IN = (
    STATE
    + CLOCK_MS
    + """
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 'applied' end
local state = state_read(KEYS[1])
if not state then return 'unavailable' end
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[2] then return 'epoch' end
local now = clock_ms()
if now - tonumber(ARGV[3]) > tonumber(ARGV[4]) then return 'stale' end
for id, units in string.gmatch(ARGV[5], '(%d+):(%d+)') do rows_add(state, id, units) end
state_write(KEYS[1], state)
redis.call('HINCRBY', KEYS[1], 'moves', 1)
redis.call('HSET', KEYS[2], ARGV[1], string.format('applied %d ', now) .. ARGV[3])
return 'applied'
"""
)

# Undo a transfer that TRANSFER_IN refused (every refusal is final): its units back to the
# giver's rows where the giver is still of the transfer's epoch (a rebuilt giver counts
# them already), and its outbox entry dropped.
# KEYS[1] the giving state, KEYS[2] its outbox; ARGV[1] transfer id
# Returns 1 when the entry was there, 0 when not.
TRANSFER_CANCEL = (
    STATE
    + """
local entry = redis.call('HGET', KEYS[2], ARGV[1])
if not entry then return 0 end
local _, epoch, _, _, rows = string.match(entry, '^(%S+) (%S+) (%d+) (%d+) (%S*)$')
local state = state_read(KEYS[1])
if state and redis.call('HGET', KEYS[1], 'epoch') == epoch then
    for id, units in string.gmatch(rows, '(%d+):(%d+)') do rows_add(state, id, units) end
    state_write(KEYS[1], state)
    redis.call('HINCRBY', KEYS[1], 'moves', 1)
end
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""
)
