"""Draw throughput per strategy as a pool grows: 5, 50 and 500 prizes, service level,
on MariaDB and Redis, next to the same strategy's purchase of a one-row voucher.

    .venv/bin/python -m benchmarks.draw [--processes 4] [--seconds 3] [--rounds 3]
        [--prizes 5,50,500] [--strategies db_pessimistic,db_optimistic,db_atomic,redis_lock,redlock]

``db_pessimistic_group`` is a variant measured here only: ``db_pessimistic`` locking
the stock group's one row instead of every row of the group.

Each run lets several processes draw (or buy) with distinct users for a fixed time;
rounds alternate the runs so that drift in the machine's speed hits all alike.
Printed: takes per second (median of the rounds), each pool's ratio to the 5-prize
pool and the 5-prize pool's ratio to the purchase, of the same strategy in the same
run. Stock is large enough never to run out, and there is no "no prize" weight, so
every draw decrements a row.
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

SAFE = "db_pessimistic,db_pessimistic_group,db_optimistic,db_atomic,redis_lock,redlock"
UNITS = 50_000_000
# A variant measured here only: db_pessimistic locking the group's one row instead of
# every row of the group (every writer of the group's stock, restock included, updates
# that row first), to see which of the two scales with the pool's size.
GROUP_ROW = "db_pessimistic_group"


def register_group_row_variant() -> None:
    from inventory.models import StockGroup
    from inventory.strategies import STRATEGIES
    from inventory.strategies.base import read_remaining
    from inventory.strategies.db_pessimistic import PessimisticStrategy

    class GroupRowPessimisticStrategy(PessimisticStrategy):
        name = GROUP_ROW

        def read(self, take, held, attempt):
            StockGroup.objects.select_for_update().filter(pk=take.group_id).values_list("id").get()
            return read_remaining(take.group_id, take.quantity)

    STRATEGIES[GROUP_ROW] = GroupRowPessimisticStrategy()


def _taker(kind: str, target_id: int, user_ids: list[int], seconds: float, start, results) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connections

    from core.errors import DomainError
    from lottery.product import pool_for_draw
    from lottery.services import pool_draw
    from orders.selectors import voucher_get
    from orders.services import order_purchase

    User = get_user_model()
    taken = refused = 0
    users = iter(user_ids)
    start.wait()
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        user = User(pk=next(users))
        try:
            # Read as the API reads, per request.
            if kind == "purchase":
                order_purchase(user=user, voucher=voucher_get(voucher_id=target_id))
            else:
                pool_draw(user=user, pool=pool_for_draw(pool_id=target_id))
            taken += 1
        except DomainError:
            refused += 1
    connections.close_all()
    results.put((taken, refused))


def make_target(kind: str, strategy: str, prizes: int) -> int:
    from datetime import timedelta

    from django.utils import timezone

    from lottery.models import Pool
    from lottery.services import pool_create, prize_create
    from orders.models import Voucher
    from orders.services import voucher_create

    now = timezone.now()
    window = {"begin_at": now - timedelta(minutes=1), "end_at": now + timedelta(hours=2)}
    # Created under a registered name, then switched: the variant is not one of the model's choices.
    if kind == "purchase":
        voucher = voucher_create(title=f"bench {strategy}", stock=UNITS, strategy="db_atomic", **window)
        Voucher.objects.filter(pk=voucher.pk).update(strategy=strategy)
        return voucher.pk
    pool = pool_create(
        name=f"bench {strategy} {prizes}", draws_per_user=1, no_prize_weight=0, strategy="db_atomic", **window
    )
    for n in range(prizes):
        prize_create(pool=pool, name=f"prize {n}", stock=UNITS // prizes)
    Pool.objects.filter(pk=pool.pk).update(strategy=strategy)
    return pool.pk


def run(kind: str, strategy: str, prizes: int, processes: int, seconds: float, users_per_process: int):
    from django.contrib.auth import get_user_model
    from django.db import connections

    from accounts.services import users_with_tokens_create

    pairs = users_with_tokens_create(count=processes * users_per_process, prefix="bench")
    ids = list(get_user_model().objects.filter(username__in=[u for u, _ in pairs]).values_list("id", flat=True))
    target = make_target(kind, strategy, prizes)
    connections.close_all()
    per_process = [(kind, target, ids[n::processes], seconds) for n in range(processes)]
    outcomes = run_together(_taker, per_process, timeout=seconds + 120)
    return sum(t for t, _ in outcomes) / seconds, sum(r for _, r in outcomes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prizes", default="5,50,500", help="prizes per pool, comma-separated")
    parser.add_argument("--strategies", default=SAFE, help="comma-separated")
    args = parser.parse_args(argv)

    from locking.testing import RedisServer

    lock_servers = [RedisServer().start() for _ in range(3)]
    os.environ["LOCK_REDIS_URLS"] = ",".join(server.url for server in lock_servers)
    try:
        return report(args)
    finally:
        for server in lock_servers:
            server.close()


def report(args) -> int:
    from .purchase import setup_django

    setup_django()
    register_group_row_variant()  # before the processes fork, so that they all know it
    import redis
    from django.conf import settings

    from harness.machine import describe

    strategies = args.strategies.split(",")
    sizes = [int(n) for n in args.prizes.split(",")]
    shapes = [("purchase", 1)] + [("draw", n) for n in sizes]
    print("# Draw throughput per strategy and pool size\n")
    print(f"Machine: {describe(redis.Redis.from_url(settings.LOCK_REDIS_URL))}; MariaDB at 127.0.0.1")
    print(f"{args.processes} processes, {args.seconds:g} s per run, {args.rounds} rounds, ", end="")
    print(f"RACE_WINDOW_MS={settings.RACE_WINDOW_MS}\n")
    users_per_process = int(args.seconds * 3000 / args.processes) + 100
    rates: dict[tuple[str, str, int], list[float]] = {}
    total, n = args.rounds * len(strategies) * len(shapes), 0
    for round_ in range(args.rounds):
        for strategy in strategies:
            for kind, prizes in shapes:
                n += 1
                label = "purchase" if kind == "purchase" else f"draw, {prizes} prizes"
                print(f"  [{n}/{total}] round {round_ + 1}: {strategy}, {label} ...", file=sys.stderr, flush=True)
                rate, _ = run(kind, strategy, prizes, args.processes, args.seconds, users_per_process)
                rates.setdefault((strategy, kind, prizes), []).append(rate)
    header = ["strategy", "purchase/s"] + [f"draw/s, {n} prizes" for n in sizes]
    header += [f"{n} / {sizes[0]} prizes" for n in sizes[1:]] + [f"draw {sizes[0]} / purchase"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for strategy in strategies:
        median = {shape: statistics.median(rates[(strategy, *shape)]) for shape in shapes}
        draws = [median[("draw", n)] for n in sizes]
        cells = [strategy, f"{median[('purchase', 1)]:.0f}"] + [f"{d:.0f}" for d in draws]
        cells += [f"{d / draws[0]:.2f}x" for d in draws[1:]] + [f"{draws[0] / median[('purchase', 1)]:.2f}x"]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
