"""The hold window each waiting reservation was made under.

A take's record is written by the persisting worker after the take, and its hold window (a
voucher's payment window, a pool's claim window) decides whether it is written ``held``
until a deadline or settled at once. Staff may change the window while reservations wait
in the stream: written with the window of the moment the worker runs, a purchase made with
ten minutes to pay would be written paid, or one made free written held. So the window of
a waiting reservation is the one in force when RESERVE made it.

RESERVE does not record it: every purchase and draw pays for what RESERVE does, and the
window changes seldom. The change records it instead. The state's ``rules`` end with the
window (``values.rules_value``), and SET_RULES, which writes new rules atomically with
respect to every RESERVE, notes in the state's ``holds`` field, when the window changes
while reservations wait, ``<n>:<window>``: the reservations numbered up to n were made
under that window. A reservation's window is then the one noted by the first change after
it (the lowest n at or above its number), or the item's own when none came since.
Notes below the stream's first entry name no waiting reservation and are dropped by the
next change. A load starts with no notes: it is refused while reservations wait.

What is left: a reservation made under rules loaded before they carried the window, whose
window changes while it waits, is written with the item's window of the moment (no note can
say the old one), as is one whose state was lost while it waited (SET_RULES finds no state to
note in; the rebuild persists the stream with the item's window); one made in the moment
between the change's commit and its SET_RULES is noted with the old window; and a deadline
counts from the reservation, so a backlog longer than the window writes a record whose
deadline has passed (expired at once by the sweep).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .values import GroupKeys, Pending, text_of

# Change the rules of a loaded state (a new window, draw limit, weight of taking nothing or
# hold window): a missing one is rebuilt from the database, which holds the change. A new
# hold window while reservations wait notes the old one for them (above).
# KEYS[1] state, KEYS[2] pending stream; ARGV[1] rules.
# Returns 1 when changed, 0 when no state is loaded.
SET_RULES = """
local live = redis.call('HGET', KEYS[1], 'live')
if not live then return 0 end
local old = string.sub(redis.call('HGET', KEYS[1], 'rules') or '', 65)
if old ~= '' and old ~= string.sub(ARGV[1], 65) and redis.call('XLEN', KEYS[2]) > 0 then
    local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1][1]
    local floor = tonumber(string.match(first, '^(%d+)'))
    local notes = {}
    for n, hold in string.gmatch(redis.call('HGET', KEYS[1], 'holds') or '', '(%d+):(%d+)') do
        if tonumber(n) >= floor then notes[#notes + 1] = n .. ':' .. hold end
    end
    notes[#notes + 1] = string.format('%d', struct.unpack('>d', live)) .. ':' .. old
    redis.call('HSET', KEYS[1], 'holds', table.concat(notes, ' '))
end
redis.call('HSET', KEYS[1], 'rules', ARGV[1])
return 1
"""


def windows_read(client, group_id: int, entries: list) -> list[Pending]:
    """The reservations of ``entries`` (read from the group's stream: id and fields), each with
    the hold window noted for it by a change since it was made; None where none was (the
    item's own is taken). Read after the entries: a change since notes their window."""
    pending = [Pending.from_entry(group_id, entry_id, fields) for entry_id, fields in entries]
    if not pending:
        return pending
    holds = client.hget(GroupKeys.of(group_id).state, "holds")
    notes = sorted((int(n), int(hold)) for n, hold in (one.split(":") for one in text_of(holds or b"").split()))
    return [
        replace(one, hold_seconds=next((hold for n, hold in notes if n >= number), None))
        for one in pending
        for number in (int(one.entry_id.split("-")[0]),)
    ]


def hold_windows(fresh: list[Pending], item_window: Callable[[], int]) -> list[int]:
    """Each reservation's hold window (seconds): the one in force when it was made, as its entry carries it (a window
    changed while it waited changes not its record); ``item_window()``, the item's now, for an entry without."""
    now = item_window() if any(one.hold_seconds is None for one in fresh) else 0
    return [now if one.hold_seconds is None else one.hold_seconds for one in fresh]
