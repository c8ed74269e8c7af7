"""What an ended ``redis_lua`` sale keeps in Redis until it is closed
(``inventory.redis_lua.item_states.item_reservations_close``), and what the close frees.

    .venv/bin/python -m benchmarks.closed_sales [--buyers 1000,10000,100000]

For each size: a voucher's state loaded in Redis alone (no database, no Django request),
as many distinct buyers reserving one unit each, and every reservation then acknowledged as
a worker's drain acknowledges it once its record is written (``Reservations.done``): the sale
as it stands after its end. Printed: ``MEMORY USAGE`` of the group's keys together, per buyer, ``used_memory``
before the sale and after it, and after the close removed its keys (``Reservations.forget``,
what a close does once the stream is persisted, with UNLINK: freed on Redis' background
thread, waited for before the figure), with the time the close held the caller. Nothing asserted;
``tests/test_reservations_close.py`` checks what the close removes and when.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta

import redis

from harness.django_setup import setup_django_without_database
from harness.machine import describe

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")
GROUP = 900_000_011


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def one_sale(client: redis.Redis, buyers: int) -> dict:
    from django.utils import timezone

    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.values import GroupKeys, Rules

    reservations = Reservations(client)
    keys = GroupKeys.of(GROUP)
    reservations.forget(group_id=GROUP)
    before = used_memory(client)
    now = timezone.now()
    rules = Rules(begin_at=now - timedelta(minutes=1), end_at=now + timedelta(hours=1), limit=1)
    reservations.load(group_id=GROUP, rules=rules, stock={1: buyers})
    for user in range(1, buyers + 1):
        answer = reservations.reserve(group_id=GROUP, user_id=user, rand=0.5, kick_ms=10**9)
        assert answer.refusal is None, answer
    # Every record written: acknowledged as a drain acknowledges them, the stream left empty.
    while batch := reservations.pending(group_id=GROUP, consumer="bench", count=1000):
        reservations.done(group_id=GROUP, pending=batch)
    kept = sum(client.memory_usage(key) or 0 for key in keys.all())
    during = used_memory(client)
    started = time.perf_counter()
    reservations.forget(group_id=GROUP)
    close_ms = (time.perf_counter() - started) * 1000
    # UNLINK frees a big key on Redis' background thread: its memory is counted once freed.
    while int(client.info("memory").get("lazyfree_pending_objects", 0)):
        time.sleep(0.01)
    return {"kept": kept, "before": before, "during": during, "after": used_memory(client), "close_ms": close_ms}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--buyers", default="1000,10000,100000", help="buyers per sale, comma-separated")
    args = parser.parse_args(argv)

    setup_django_without_database()
    client = redis.Redis.from_url(REDIS_URL)
    print(f"machine: {describe(client)}")
    print(f"Redis at {REDIS_URL}; one voucher's keys after its end, every record written")
    header = ("buyers", 8), ("keys kept", 12), ("per buyer", 11), ("used before", 13), ("with it", 11), ("closed", 11)
    print("".join(f"{name:>{width}}" for name, width in header) + f"{'close':>9}")
    for buyers in (int(size) for size in args.buyers.split(",")):
        sale = one_sale(client, buyers)
        print(
            f"{buyers:>8,}{sale['kept'] / 1e6:>10.2f}MB{sale['kept'] / buyers:>10.0f}B"
            f"{sale['before'] / 1e6:>11.2f}MB{sale['during'] / 1e6:>9.2f}MB{sale['after'] / 1e6:>9.2f}MB"
            f"{sale['close_ms']:>7.1f}ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
