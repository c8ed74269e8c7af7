"""What showing a record by its public id costs (``inventory.records.public_of``, and turning
it back, ``internal_of``): per id, and per page of a user's list, which shows up to 50.

    .venv/bin/python -m benchmarks.record_ids [--ids 20000] [--rounds 7]

Timed in this process by its CPU clock over ``--ids`` ids of each kind a site keeps (row ids
from 1 up, and ``redis_lua`` reservation ids of one state), each round in a fresh order; the
median of ``--rounds``. The baseline, measured in the same run: the keyed BLAKE2b signature
check of one admission ticket (``inventory.admission.tickets``), a cost every take of a
``queue`` item already pays. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_bench")

# The most records a page of a user's list shows (inventory.paging.PAGE_SIZE_MAX is 100;
# the default page, 50, is what the pages show).
PAGE = 50


def per_call_us(function, values: list[int], rounds: int) -> float:
    timings = []
    for _ in range(rounds):
        random.shuffle(values)
        started = time.process_time()
        for value in values:
            function(value)
        timings.append((time.process_time() - started) / len(values) * 1e6)
    return statistics.median(timings)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=20_000, help="ids of each kind timed per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    import django

    django.setup()
    import redis
    from django.conf import settings

    from harness.machine import describe
    from inventory.admission.tickets import Ticket, ticket_read
    from inventory.records import internal_of, public_of
    from inventory.redis_lua.values import reservation_id

    print("# A record's public id: what showing it and turning it back cost\n")
    print(f"machine: {describe(redis.Redis.from_url(settings.REDIS_URL))}")
    print(f"{args.ids:,} ids of each kind per round, this process's CPU clock, the median of {args.rounds} rounds\n")
    rows = list(range(1, args.ids + 1))
    reservations = [reservation_id(7, n) for n in range(1, args.ids + 1)]
    shown = [public_of(one) for one in rows + reservations]
    ticket = Ticket("voucher", 7, 42, 1, 2**62).signed()
    figures = {
        "public_of, a row's id": per_call_us(public_of, rows, args.rounds),
        "public_of, a reservation's id": per_call_us(public_of, reservations, args.rounds),
        "internal_of, an id shown": per_call_us(internal_of, shown, args.rounds),
        "baseline: a ticket's check": per_call_us(
            lambda _: ticket_read(ticket, kind="voucher", item_id=7, user_id=42), rows, args.rounds
        ),
    }
    base = figures["baseline: a ticket's check"]
    print(f"{'':<34}{'us/call':>9}{'x ticket':>10}")
    for name, us in figures.items():
        print(f"{name:<34}{us:>9.2f}{us / base:>9.2f}x")
    # Its records' ids and the next page's cursor shown, the cursor it was asked with turned back.
    shown_one = max(figures["public_of, a row's id"], figures["public_of, a reservation's id"])
    page = (PAGE + 1) * shown_one + figures["internal_of, an id shown"]
    print(f"\nA page of {PAGE} records, its cursor in and out: {page:.0f} us of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
