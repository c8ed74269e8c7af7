"""What one RESERVE costs Redis: the script's CPU per call (``INFO commandstats``, its
``usec_per_call``) beside each command it runs, their sum, and what the script itself adds.

    .venv/bin/python -m benchmarks.reserve_cpu [--calls 20000] [--rounds 3]

For each of a voucher (one row, one take per user), a pool (5 rows and a weight of no prize,
3 draws per user), the voucher with two rate limits counted (a user's and an address's,
never reached) and the voucher with the script sent by ``EVALSHA`` rather than called as a
Redis function (where the code calls it as one), alternated over the rounds: ``CONFIG
RESETSTAT``, ``--calls`` reservations through ``Reservations.reserve`` (one round trip each,
as a request makes it; a new user each, stock that never runs out), then ``INFO
commandstats``. Printed: medians of the rounds. The statistics are the whole server's, and
``CONFIG RESETSTAT`` clears them: run it against a Redis of its own (``BENCH_REDIS_URL``),
where nothing else runs commands.

Redis times a command from its start to its end on the clock, so a busy machine (another
process taking the CPU mid-script, caches filled by others between calls) shows in the
figures: the load average is printed beside them, and before and after are compared only
when measured in one session.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
from collections import defaultdict
from datetime import timedelta

import redis

from harness.django_setup import setup_django_without_database
from harness.machine import describe

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")
VOUCHER_GROUP, POOL_GROUP = 900_000_011, 900_000_012
KINDS = ("voucher", "pool", "voucher, rate limits", "voucher, EVALSHA")
SCRIPTS = ("fcall", "evalsha")


def groups_load(client: redis.Redis) -> None:
    from django.utils import timezone

    from inventory.redis_lua.client import Reservations
    from inventory.redis_lua.values import GroupKeys, Rules

    reservations = Reservations(client)
    now = timezone.now()
    # A hold window, as a sale with payments has (the rules end with it).
    window = {"begin_at": now - timedelta(minutes=1), "end_at": now + timedelta(hours=1), "hold_seconds": 600}
    for group in (VOUCHER_GROUP, POOL_GROUP):
        client.delete(*GroupKeys.of(group).all())
    reservations.load(group_id=VOUCHER_GROUP, rules=Rules(**window, limit=1), stock={1: 10**12})
    pool_stock = {n: 10**11 for n in range(1, 6)}
    reservations.load(group_id=POOL_GROUP, rules=Rules(**window, limit=3, no_take=10**11), stock=pool_stock)


def _rate(user: int):
    """A user's and an address's limit per second, as a request counts them (a new user's
    counter starts, the address's goes on), too high to be reached."""
    from core.ratelimit import Limit, RateCount

    return RateCount(
        action="purchase", counted=((Limit("user", 10**9, 1), str(user)), (Limit("address", 10**9, 1), "127.0.0.1"))
    )


def measure(client: redis.Redis, kind: str, calls: int, first_user: int) -> dict[str, tuple[float, float]]:
    """``calls`` reservations of ``kind``; {command: (calls per RESERVE, us per RESERVE)},
    the script's own under ``fcall`` or ``evalsha``."""
    from core.redis_script import OwnConnectionScript
    from inventory.redis_lua import scripts
    from inventory.redis_lua.client import Reservations

    reservations = Reservations(client)
    if kind.endswith("EVALSHA"):
        reservations._reserve = OwnConnectionScript(client, scripts.RESERVE)
    group = POOL_GROUP if kind == "pool" else VOUCHER_GROUP
    rand = random.Random(first_user).random
    reservations.reserve(group_id=group, user_id=first_user - 1, rand=0.5)  # the script loaded, the connection made
    client.config_resetstat()
    for user in range(first_user, first_user + calls):
        rate = _rate(user) if kind.endswith("rate limits") else None
        answer = reservations.reserve(group_id=group, user_id=user, rand=rand(), rate=rate)
        assert answer.refusal is None, answer
    stats = client.info("commandstats")
    made = max(stats.get(f"cmdstat_{script}", {}).get("calls", 0) for script in SCRIPTS)
    return {
        name.removeprefix("cmdstat_"): (stat["calls"] / made, stat["usec"] / made)
        for name, stat in stats.items()
        if name != "cmdstat_config|resetstat"
    }


def report(kind: str, rounds: list[dict[str, tuple[float, float]]]) -> None:
    script = next(name for name in SCRIPTS if name in rounds[0] and rounds[0][name][0] >= 1)
    commands = sorted({name for one in rounds for name in one} - {script})
    per_call = {name: statistics.median(one.get(name, (0, 0))[1] for one in rounds) for name in [script, *commands]}
    counts = {name: statistics.median(one.get(name, (0, 0))[0] for one in rounds) for name in commands}
    inside = sum(per_call[name] for name in commands)
    print(f"\nRESERVE {kind}: {script} {per_call[script]:.2f} us per call (rounds: ", end="")
    print(", ".join(f"{one[script][1]:.2f}" for one in rounds) + ")")
    print(f"  {'command':<14}{'per RESERVE':>12}{'us each':>10}{'us per RESERVE':>16}")
    for name in commands:
        each = per_call[name] / counts[name] if counts[name] else 0.0
        print(f"  {name:<14}{counts[name]:>12.2f}{each:>10.2f}{per_call[name]:>16.2f}")
    print(f"  {'commands':<14}{'':>12}{'':>10}{inside:>16.2f}")
    print(f"  {'the script':<14}{'':>12}{'':>10}{per_call[script] - inside:>16.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    setup_django_without_database()
    client = redis.Redis.from_url(REDIS_URL)
    print(f"machine: {describe(client)}")
    print(f"{args.calls:,} calls x {args.rounds} rounds per kind, one round trip each, Redis at {REDIS_URL}")
    print("load average before: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    results: dict[str, list] = defaultdict(list)
    user = 10_000_000
    for round_number in range(args.rounds):
        for kind in KINDS if round_number % 2 == 0 else reversed(KINDS):
            groups_load(client)
            results[kind].append(measure(client, kind, args.calls, user))
            user += args.calls + 1
    for kind in KINDS:
        report(kind, results[kind])
    print("\nload average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    groups_load(client)  # leave the streams empty
    return 0


if __name__ == "__main__":
    sys.exit(main())
