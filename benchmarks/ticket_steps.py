"""What each step a take of a ``queue`` item adds to a take costs, in a hot loop: reading
and checking its ticket (``inventory.admission.room.ticket_held``), asking whether the
take's Redis can spend it in its own script (``TicketHeld.spends_with``), and the ticket's
keys and arguments packed into RESERVE's command; beside the named clients every take asks
for (``core.named_redis``). For finding what to trim: in a request the same steps cost
several times as much, their caches cold among the rest of it (``benchmarks.admission_cpu``
measures the whole take).

    .venv/bin/python -m benchmarks.ticket_steps [--calls 100000] [--rounds 7]

Timed by this thread's CPU clock, the median of ``--rounds``; the baseline, measured in the
same run, is one ``PING`` on an open connection (a round trip's CPU on the client's side).
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_bench")


def per_call_us(function, calls: int, rounds: int) -> float:
    timings = []
    for _ in range(rounds):
        started = time.thread_time()
        for _ in range(calls):
            function()
        timings.append((time.thread_time() - started) / calls * 1e6)
    return statistics.median(timings)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000, help="calls of each step per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    import django

    django.setup()
    from harness.machine import describe
    from inventory.admission.keys import room_client
    from inventory.admission.room import ticket_held
    from inventory.admission.tickets import Ticket
    from orders.product import VOUCHER

    client = room_client()
    print("# The steps a take of a queue item adds, in a hot loop\n")
    print(f"machine: {describe(client)}")
    print(f"{args.calls:,} calls of each step per round, this thread's CPU clock, the median of {args.rounds} rounds\n")

    class Item:
        pk = 7

    user_id, deadline_ms = 42, int(time.time() * 1000) + 3_600_000
    text = Ticket(VOUCHER.kind, Item.pk, user_id, 1, deadline_ms).signed()
    held = ticket_held(VOUCHER, Item, user_id=user_id, ticket=text)
    connection = client.connection_pool.get_connection()
    reserve = ("FCALL", "flashsale_reserve", 3, "state", "pending", "abandoned", user_id, "0.5", 200, "", 1)
    steps = {
        "baseline: PING, one round trip": lambda: (connection.send_command("PING"), connection.read_response()),
        "ticket_held (read, checked)": lambda: ticket_held(VOUCHER, Item, user_id=user_id, ticket=text),
        "TicketHeld.spends_with": lambda: held.spends_with(client),
        "RESERVE packed, no ticket": lambda: connection.pack_command(*reserve, "", ""),
        "RESERVE packed, with the ticket": lambda: connection.pack_command(
            *reserve[:2], 6, *reserve[3:6], *held.spend_keys, *reserve[6:], *held.spend_args()
        ),
        "a named client (room_client)": room_client,
    }
    try:
        figures = {name: per_call_us(step, args.calls, args.rounds) for name, step in steps.items()}
    finally:
        client.connection_pool.release(connection)
    base = figures["baseline: PING, one round trip"]
    print(f"{'':<36}{'us/call':>9}{'x PING':>9}")
    for name, us in figures.items():
        print(f"{name:<36}{us:>9.2f}{us / base:>8.3f}x")
    added = (
        figures["ticket_held (read, checked)"]
        + figures["TicketHeld.spends_with"]
        + figures["RESERVE packed, with the ticket"]
        - figures["RESERVE packed, no ticket"]
    )
    print(f"\nWhat the ticket adds to a redis_lua take, hot: {added:.2f} us ({added / base:.3f}x a PING)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
