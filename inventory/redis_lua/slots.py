"""Where a bucketed item's states sit in a Redis Cluster's slot space: each bucket's hash tag
is chosen for its slot, so that the states of an item spread evenly over the 16384 slots
for any count of buckets, and so over masters that each own a contiguous range of them
(the layout ``redis-cli --cluster create`` makes).

Plain Python: ``binascii.crc_hqx`` is the CRC16 Redis Cluster hashes a key's tag with.
"""

from __future__ import annotations

import functools
from binascii import crc_hqx

SLOTS = 16384
# A bucket's tag is the first of ``group:<g>:<b>:<n>``, n = 0, 1, 2..., whose slot lies within
# this many slots past the bucket's target: about SLOTS / SLOT_WINDOW names tried, once per
# process (the answer is cached), and a state off its target by fewer slots than that.
SLOT_WINDOW = 8
# Bucket ids stop at 63, so triples at 21: eight bits reverse every triple number there is.
_TRIPLE_BITS = 8


def tag_slot(tag: str) -> int:
    """The Cluster slot of every key under the hash tag ``{<tag>}``."""
    return crc_hqx(tag.encode(), 0) % SLOTS


def bucket_offset(bucket: int) -> int:
    """How many slots past bucket 0's slot bucket ``bucket``'s state is aimed.

    Buckets 3k, 3k+1 and 3k+2 fall a third of the slot space apart, so every whole triple puts
    one state on each of 3 masters that own a third each, and a partial triple its one or two
    on different masters: any count of buckets is spread as evenly as it can be. The triples
    themselves spread over the first third by the van der Corput sequence (k's bits
    reversed), whose every prefix is spread evenly, so that other counts of masters are
    served nearly as well. Powers of 2 first, as the sequence alone would aim, served 3
    masters worse (5 buckets at 0, 1/2, 1/4, 3/4 and 1/8 of the space fall 3, 1, 1 when
    bucket 0 starts a third)."""
    triple, third = divmod(bucket, 3)
    reversed_triple = int(f"{triple:0{_TRIPLE_BITS}b}"[::-1], 2)
    return SLOTS * (third << _TRIPLE_BITS | reversed_triple) // (3 << _TRIPLE_BITS)


@functools.lru_cache(maxsize=8192)  # every key of the state names it: searched once per process
def bucket_tag(group_id: int, bucket: int) -> str:
    """The hash tag (without its braces) of bucket ``bucket``'s state of group ``group_id``:
    ``group:<g>`` for bucket 0 (an unbucketed group's keys, unchanged), else the first
    ``group:<g>:<b>:<n>`` whose slot lies less than ``SLOT_WINDOW`` past the bucket's target,
    ``bucket_offset`` past bucket 0's slot."""
    home = f"group:{group_id}"
    if bucket == 0:
        return home
    target = (tag_slot(home) + bucket_offset(bucket)) % SLOTS
    prefix = f"{home}:{bucket}:"
    # The CRC of the prefix, carried on over each n's digits: one short CRC per name tried.
    prefix_crc = crc_hqx(prefix.encode(), 0)
    n = 0
    while (crc_hqx(str(n).encode(), prefix_crc) % SLOTS - target) % SLOTS >= SLOT_WINDOW:
        n += 1
    return f"{prefix}{n}"
