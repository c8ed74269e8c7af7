"""Redlock with one server of three hung: what an acquire and a release cost.

    .venv/bin/python -m benchmarks.redlock_hung [--cycles 200] [--lease 5]

Starts three ``redis-server`` processes of its own, makes the site's clients for them
(``locking.integration.redlock_redis``: a socket timeout of a tenth of the lease), and times
acquire-and-release cycles of one ``Redlock``: first with every server answering (the
baseline), then with one stopped by SIGSTOP (it accepts connections and never answers, as a
server whose packets are dropped). Prints the median and p99 of a cycle, in ms, and the ratio
of the hung run's median to the baseline's. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time

from harness.machine import describe


def cycles(lock, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        if lock.acquire() is None:
            raise SystemExit("the lock was refused: no figure")
        lock.release()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--lease", type=float, default=5.0)
    args = parser.parse_args(argv)
    from django.conf import settings

    settings.configure(LOCK_LEASE_SECONDS=args.lease, LOCK_CONNECT_TIMEOUT=1.0)
    from locking.integration import redlock_redis
    from locking.redlock import Redlock
    from locking.testing import RedisServer

    servers = [RedisServer().start() for _ in range(3)]
    try:
        clients = [redlock_redis(server.url) for server in servers]
        lock = Redlock(clients, "bench-hung", lease=args.lease, blocking=False)
        cycles(lock, 20)  # connections made
        answering = cycles(lock, args.cycles)
        os.kill(servers[0]._process.pid, signal.SIGSTOP)
        try:
            hung = cycles(lock, max(args.cycles // 10, 5))
        finally:
            os.kill(servers[0]._process.pid, signal.SIGCONT)
    finally:
        for server in servers:
            server.stop()
    print("# Redlock, one server of three hung: an acquire and a release\n")
    print(f"machine: {describe()}; lease {args.lease} s, clients' socket timeout {args.lease / 10} s\n")
    print(f"{'servers':<24}{'cycles':>8}{'median ms':>12}{'p99 ms':>10}")
    for name, times in (("all three answer", answering), ("one hung (SIGSTOP)", hung)):
        p99 = sorted(times)[max(0, int(len(times) * 0.99) - 1)]
        print(f"{name:<24}{len(times):>8}{statistics.median(times):>12.2f}{p99:>10.2f}")
    print(f"\nhung / answering, median: {statistics.median(hung) / statistics.median(answering):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
