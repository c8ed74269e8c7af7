"""A state's count of each user's abandoned holds (``GroupKeys.abandoned``), written from the
database's by a load of the state (``Reservations.load``).

Written only where no state is live: the LOAD that follows refuses a live state, and a second
rebuild of one state (the rebuild asked for by a take and the beat's, both seeing it missing)
emptied the live state's counts, and wrote them back from the database, a moment before its
LOAD answered that the state was loaded: a take in that moment found no count for its user,
and one at the cap or in the cooldown was let hold once more.
"""

from __future__ import annotations

from collections.abc import Mapping

from .values import GroupKeys

# KEYS[1] the state, KEYS[2] its abandoned holds; ARGV user, ``abandoned_value``, ... . 0 where
# the state is live (nothing written), else 1. A thousand users to an HSET: Lua spreads no more
# than some 8,000 values into one call.
ABANDONED_LOAD = """
if redis.call('HEXISTS', KEYS[1], 'live') == 1 then
    return 0
end
redis.call('DEL', KEYS[2])
for first = 1, #ARGV, 2000 do
    redis.call('HSET', KEYS[2], unpack(ARGV, first, math.min(first + 1999, #ARGV)))
end
return 1
"""


def abandoned_load(client, group_id: int, abandoned: Mapping[int, str]) -> bool:
    """Write the database's ``abandoned`` ({user: ``abandoned_value``}) as the state's counts,
    unless the state is live; whether they were written."""
    names = GroupKeys.of(group_id)
    args = [part for pair in abandoned.items() for part in pair]
    return bool(client.register_script(ABANDONED_LOAD)(keys=(names.state, names.abandoned), args=args))
