"""Lock benchmark: ``locking`` side by side with redis-py, python-redis-lock, pottery
and the bare floor, in one run, on one Redis.

    .venv/bin/python -m benchmarks.locks [--seconds 3] [--url redis://127.0.0.1:6379/12]

Scenarios: one client uncontended; 4 and 16 processes on one key; 16 processes on
distinct keys; 3,000 keys all or nothing. Contended rows report acquisitions per
second ("cycles"), hand-offs per second (acquisitions by a different process than
the previous holder: a lock that lets its releaser take it straight back makes
many cycles and few hand-offs), the wait for each acquisition (p50/p99/max) and
Jain's fairness index over the processes' counts (1.0: every process got the same
share). Ratios are against the bare floor or redis-py measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import redis

from harness.machine import describe
from locking import Lock, lock_many

from .processes import run_together

CAD = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
SET_MANY = """
for i = 1, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end
end
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end
return 1
"""
DEL_MANY = (
    "for i = 1, #KEYS do if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end end return 1"
)


class Bare:
    """The floor: SET NX PX, then a Lua compare-and-delete. Two round trips, nothing else."""

    def __init__(self, client, key):
        self.client, self.key = client, f"bare:{key}"
        self.cad = client.register_script(CAD)

    def acquire(self):
        import os

        self.token = os.urandom(16).hex()
        while not self.client.set(self.key, self.token, nx=True, px=10_000):
            time.sleep(0.001)
        return True

    def release(self):
        self.cad((self.key,), (self.token,))


class RedisPy:
    def __init__(self, client, key):
        self.lock = client.lock(f"redispy:{key}", timeout=10)

    def acquire(self):
        return self.lock.acquire()

    def release(self):
        self.lock.release()


class PythonRedisLock:
    def __init__(self, client, key):
        import redis_lock

        self.lock = redis_lock.Lock(client, f"prl:{key}", expire=10)

    def acquire(self):
        return self.lock.acquire()

    def release(self):
        self.lock.release()


class Pottery:
    def __init__(self, client, key):
        from pottery import Redlock

        self.lock = Redlock(key=f"pottery:{key}", masters={client}, auto_release_time=10)

    def acquire(self):
        return self.lock.acquire()

    def release(self):
        self.lock.release()


class Ours:
    def __init__(self, client, key):
        self.lock = Lock(client, f"ours:{key}", lease=10)

    def acquire(self):
        return self.lock.acquire()

    def release(self):
        self.lock.release()


CONTENDERS = {
    "bare floor": Bare,
    "locking.Lock": Ours,
    "redis-py Lock": RedisPy,
    "python-redis-lock": PythonRedisLock,
    "pottery Redlock": Pottery,
}


def percentile(values, q):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def jain(counts):
    return sum(counts) ** 2 / (len(counts) * sum(c * c for c in counts)) if any(counts) else 0.0


def _worker(url, contender, key, seconds, start, results):
    client = redis.Redis.from_url(url)
    lock = CONTENDERS[contender](client, key)
    waits, taken_at = [], []
    start.wait()
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        asked = time.monotonic()
        lock.acquire()
        taken_at.append(time.monotonic_ns())  # one clock for every process on this machine
        waits.append(time.monotonic() - asked)
        lock.release()
    results.put((waits, taken_at))


def contended(url, contender, processes, seconds, same_key=True):
    per_process = run_together(
        _worker,
        [(url, contender, "hot" if same_key else f"k{n}", seconds) for n in range(processes)],
        timeout=seconds + 120,
    )
    waits = [w for ws, _ in per_process for w in ws]
    # A hand-off: the lock passes to a different process than the one that held it last.
    order = sorted((t, n) for n, (_, taken_at) in enumerate(per_process) for t in taken_at)
    handoffs = sum(1 for (_, a), (_, b) in zip(order, order[1:], strict=False) if a != b)
    return {
        "cycles/s": len(waits) / seconds,
        "hand-offs/s": handoffs / seconds,
        "p50 ms": percentile(waits, 0.5) * 1000,
        "p99 ms": percentile(waits, 0.99) * 1000,
        "max ms": max(waits) * 1000 if waits else float("nan"),
        "fairness": jain([len(ws) for ws, _ in per_process]),
    }


def uncontended(client, rounds=40, cycles=300):
    """Per contender, the median cycles/s of ``rounds`` runs of ``cycles`` each and the
    median of its per-round ratio to the bare floor.

    Contenders take turns within every round, in an order rotated from round to
    round, and each is compared with the floor of its own round: drift in the
    machine's speed then cancels out of the ratio instead of landing on whichever
    contender ran during a slow spell.
    """
    locks = {name: factory(client, "solo") for name, factory in CONTENDERS.items()}
    names = list(locks)
    rates = {name: [] for name in names}
    ratios = {name: [] for name in names}
    for round_ in range(rounds + 1):
        this_round = {}
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            lock = locks[name]
            started = time.perf_counter()
            for _ in range(cycles):
                lock.acquire()
                lock.release()
            this_round[name] = cycles / (time.perf_counter() - started)
        if round_:  # round 0 warms up: scripts loaded, connections open
            for name, rate in this_round.items():
                rates[name].append(rate)
                ratios[name].append(rate / this_round["bare floor"])
    return {
        name: {"cycles/s": statistics.median(rates[name]), "x floor": statistics.median(ratios[name])} for name in names
    }


def many_keys(client, count=3000, rounds=5):
    names = [f"sku:{n}" for n in range(count)]
    set_many, del_many = client.register_script(SET_MANY), client.register_script(DEL_MANY)
    bare_keys = [f"bare-many:{n}" for n in range(count)]

    def bare():
        assert set_many(bare_keys, ("t", 10_000)) == 1
        del_many(bare_keys, ("t",))

    held = lock_many(client, names, lease=10, renew=False)

    def ours():
        assert held.acquire() is not None
        held.release()

    locks = [client.lock(f"redispy-many:{n}", timeout=10) for n in range(count)]

    def one_by_one():
        for lock in locks:
            lock.acquire()
        for lock in locks:
            lock.release()

    timings = {}
    for label, run in (
        ("bare single Lua script", bare),
        ("locking.lock_many", ours),
        ("redis-py one by one", one_by_one),
    ):
        run()
        started = time.perf_counter()
        for _ in range(rounds):
            run()
        timings[label] = (time.perf_counter() - started) / rounds
    return timings


def table(title, rows, columns):
    print(f"\n### {title}\n")
    print("| contender | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, row in rows.items():
        cells = [
            f"{row[c]:.3f}"
            if isinstance(row[c], float) and row[c] < 10
            else f"{row[c]:,.0f}"
            if isinstance(row[c], float)
            else str(row[c])
            for c in columns
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="redis://127.0.0.1:6379/12", help="Redis to run against (it is flushed)")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each timed run")
    parser.add_argument("--only", choices=["uncontended", "contended", "many"], action="append")
    args = parser.parse_args(argv)
    client = redis.Redis.from_url(args.url)
    client.flushdb()
    only = set(args.only or ["uncontended", "contended", "many"])
    print(f"# Lock benchmark\n\nMachine: {describe(client)}\n\nEach timed run lasts {args.seconds:g} s.", flush=True)

    if "uncontended" in only:
        print("  uncontended ...", file=sys.stderr, flush=True)
        rows = uncontended(client)
        table(
            "One client, uncontended acquire + release (40 rounds of 300 cycles; medians, and the median"
            " of each round's ratio to the floor)",
            rows,
            ["cycles/s", "x floor"],
        )

    if "contended" in only:
        for processes, same_key in ((4, True), (16, True), (16, False)):
            rows = {}
            for name in CONTENDERS:
                if name == "bare floor":
                    continue
                print(
                    f"  {processes} processes ({'one key' if same_key else 'distinct keys'}): {name} ...",
                    file=sys.stderr,
                    flush=True,
                )
                client.flushdb()
                rows[name] = contended(args.url, name, processes, args.seconds, same_key)
            base = rows["redis-py Lock"]
            for row in rows.values():
                row["x redis-py"] = row["hand-offs/s"] / max(base["hand-offs/s"], 1e-9)
                row["max x redis-py"] = row["max ms"] / base["max ms"]
            where = "one key" if same_key else "distinct keys"
            columns = [
                "cycles/s",
                "hand-offs/s",
                "x redis-py",
                "p50 ms",
                "p99 ms",
                "max ms",
                "max x redis-py",
                "fairness",
            ]
            table(f"{processes} processes, {where}", rows, columns)

    if "many" in only:
        client.flushdb()
        timings = many_keys(client)
        bare, ours, slow = (
            timings["bare single Lua script"],
            timings["locking.lock_many"],
            timings["redis-py one by one"],
        )
        print("\n### 3,000 keys, all or nothing (acquire + release)\n")
        print("| contender | ms | x bare script |\n|---|---|---|")
        for label, seconds in timings.items():
            print(f"| {label} | {seconds * 1000:.1f} | {seconds / bare:.2f} |")
        print(f"\nlock_many: {slow / ours:.0f}x faster than redis-py one by one, {ours / bare:.2f}x the bare script.")
    client.flushdb()
    return 0


if __name__ == "__main__":
    sys.exit(main())
