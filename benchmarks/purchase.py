"""Purchase throughput of the flash sale per strategy, service level, on MariaDB and Redis.

    .venv/bin/python -m benchmarks.purchase [--processes 8] [--seconds 5] [--rounds 3]

Each strategy sells one voucher of ample stock to distinct buyers from several
processes for a fixed time; rounds alternate the strategies so that drift in
the machine's speed hits all alike. Printed: purchases per second (median of the
rounds) and the ratio to ``db_pessimistic`` in the same run.

The baseline ``redis-py Lock + tx`` is the ``redis_lock`` strategy's transaction
inside a redis-py ``Lock`` on the item (polling every 100 ms while busy): what a
team gets from the library's default lock.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from .processes import run_together

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_bench")


def setup_django():
    import django
    import MySQLdb

    url = os.environ["DATABASE_URL"]
    name = url.rsplit("/", 1)[1]
    connection = MySQLdb.connect(host="127.0.0.1", user="root", passwd="")
    connection.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4")
    connection.close()
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def redispy_baseline_strategy():
    """``redis_lock`` with every lock replaced by redis-py's default ``Lock``."""
    from django.conf import settings

    from inventory.strategies.redis_lock import RedisLockStrategy
    from locking.integration import locks_redis

    class RedisPyLock:
        def __init__(self, name, blocking=True, blocking_timeout=None, fenced=True):  # redis-py's has no fence
            self.lock = locks_redis().lock(
                f"redispy:{name}",
                timeout=settings.LOCK_LEASE_SECONDS,
                blocking=blocking,
                blocking_timeout=blocking_timeout,
            )

        def acquire(self):
            return 1 if self.lock.acquire() else None

        def release(self):
            if self.lock.local.token is not None:  # idempotent, as locking's locks are
                self.lock.release()

        def check(self):
            pass

        @property
        def fence(self):
            # redis-py's lock has no fence: stamp the wall clock, which grows from one holder to the next.
            return time.time_ns()

    class RedisPyLockStrategy(RedisLockStrategy):
        name = "redispy_lock"

        def _lock(self, name, **options):
            return RedisPyLock(name, **options)

    return RedisPyLockStrategy()


# A queue no worker consumes: a buyer's warm-up message goes there and is purged at once.
WARM_UP_QUEUE = "bench-warm-up"


def _broker_ready() -> None:
    """Send one message to the Celery broker before the clock starts, as a server's process
    has long before its purchases: a purchase with a payment window asks for its expiry
    task, and a fresh process's first message set Celery up (about 28 ms of CPU here, 0.8 ms
    a message after), which a run of a few seconds from fresh processes charged to the
    purchases with a window, some 8% of their CPU."""
    from celery import current_app

    current_app.send_task("benchmarks.warm_up", queue=WARM_UP_QUEUE)
    with current_app.connection_for_write() as connection:
        connection.default_channel.queue_purge(WARM_UP_QUEUE)


def _buyer(strategy, voucher_id, user_ids, seconds, start, results):
    from django.contrib.auth import get_user_model
    from django.db import connections

    from core.errors import DomainError
    from inventory.strategies import STRATEGIES
    from orders.selectors import voucher_get
    from orders.services import order_purchase

    if strategy == "redispy_lock":
        STRATEGIES["redispy_lock"] = redispy_baseline_strategy()
    User = get_user_model()
    # Read once with its stock, as a request reads it (a stale read: only the strategy's
    # guarded write decides a sale).
    voucher = voucher_get(voucher_id=voucher_id)
    _broker_ready()
    bought = refused = 0
    start.wait()
    began = time.monotonic()
    until = began + seconds
    # A fast strategy may use up the process's buyers before the time is up: its rate is
    # then counted over the time it ran.
    for user_id in user_ids:
        if time.monotonic() >= until:
            break
        try:
            order_purchase(user=User(pk=user_id), voucher=voucher)
            bought += 1
        except DomainError:
            refused += 1
    elapsed = time.monotonic() - began
    connections.close_all()
    results.put((bought / elapsed, refused))


def run(strategy, processes, seconds, users_per_process, *, window: int = 0, buckets: int = 1, stock: int = 10_000_000):
    """Purchases per second of one fresh voucher of ``stock`` units in ``buckets`` under
    ``strategy`` (held for ``window`` seconds for their payment, 0: paid when made), and the
    refusals."""
    from datetime import timedelta

    from django.db import connections
    from django.utils import timezone

    from accounts.services import users_with_tokens_create
    from orders.models import Voucher
    from orders.services import voucher_create

    pairs = users_with_tokens_create(count=processes * users_per_process, prefix="bench")
    from django.contrib.auth import get_user_model

    ids = list(get_user_model().objects.filter(username__in=[u for u, _ in pairs]).values_list("id", flat=True))
    from inventory.strategies import STRATEGIES

    now = timezone.now()
    voucher = voucher_create(
        title=f"bench {strategy}",
        stock=stock,
        buckets=buckets,
        begin_at=now - timedelta(minutes=1),
        end_at=now + timedelta(hours=1),
        # A registered strategy opens the voucher's state as it would for a sale (redis_lua's
        # in Redis); the baseline lock is none of them, and writes its own.
        strategy=strategy if strategy in STRATEGIES else "db_atomic",
        hold_seconds=window,
    )
    if strategy not in STRATEGIES:
        Voucher.objects.filter(pk=voucher.pk).update(strategy=strategy)
    connections.close_all()
    outcomes = run_together(
        _buyer, [(strategy, voucher.pk, ids[n::processes], seconds) for n in range(processes)], timeout=seconds + 120
    )
    return sum(rate for rate, _ in outcomes), sum(refused for _, refused in outcomes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--strategies", default="db_pessimistic,redis_lock,redispy_lock,db_atomic", help="comma-separated"
    )
    args = parser.parse_args(argv)
    setup_django()
    import redis
    from django.conf import settings

    from harness.machine import describe

    strategies = args.strategies.split(",")
    print("# Purchase throughput per strategy\n")
    print(f"Machine: {describe(redis.Redis.from_url(settings.LOCK_REDIS_URL))}; MariaDB at 127.0.0.1")
    print(f"{args.processes} processes, {args.seconds:g} s per run, {args.rounds} rounds, ", end="")
    print(f"RACE_WINDOW_MS={settings.RACE_WINDOW_MS}\n")
    users_per_process = int(args.seconds * 3000 / args.processes) + 100
    rates = {s: [] for s in strategies}
    refusals = {s: 0 for s in strategies}
    for round_ in range(args.rounds):
        for strategy in strategies:
            print(f"  round {round_ + 1}: {strategy} ...", file=sys.stderr, flush=True)
            rate, refused = run(strategy, args.processes, args.seconds, users_per_process)
            rates[strategy].append(rate)
            refusals[strategy] += refused
    base = statistics.median(rates["db_pessimistic"]) if "db_pessimistic" in rates else None
    label = {"redispy_lock": "redis-py Lock + tx"}
    print("| strategy | purchases/s (median) | rounds | x db_pessimistic | refused |")
    print("|---|---|---|---|---|")
    for strategy, values in rates.items():
        median = statistics.median(values)
        ratio = f"{median / base:.2f}" if base else "-"
        rounds = ", ".join(f"{v:.0f}" for v in values)
        print(f"| {label.get(strategy, strategy)} | {median:.0f} | {rounds} | {ratio} | {refusals[strategy]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
