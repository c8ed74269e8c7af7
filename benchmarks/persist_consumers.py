"""Persisting one ``redis_lua`` item with 1, 2 and 4 consumer processes at once.

    .venv/bin/python -m benchmarks.persist_consumers [--reservations 20000] [--rounds 3] [--consumers 1,2,4]
        [--buckets 1]

Each round fills the stream of a fresh voucher (one stock row: the hot row every batch
locks) with ``--reservations`` reservations of distinct buyers, then forks the consumers,
released together, each one drain of the group (``inventory.redis_lua.drain.drain_group``,
batches of 500, its own database connection) until the stream is empty. With ``--buckets N``
the voucher has N buckets, a row and a state each, and the reservations are spread evenly
over the N states' streams; the consumers are spread over the streams
(``benchmarks.persist_fill.streams_spread``: with fewer consumers than streams each drains
its streams one after another), and a batch locks its own bucket's row only. Rounds alternate the
order of the runs, so that drift in the machine's speed hits all alike. A last contender,
two consumers that build each batch's INSERT inside its transaction (as ``bulk_create``
does), shows what building it first gives. Printed:
rows written per second (median of the rounds), the ratio to one consumer in the same run
(of the medians, and the median of each round's own ratio),
and where the CPU went: MariaDB's server, the consumers, Redis, as seconds per 10,000 rows
and the cores they kept busy during the drain, beside the whole machine's (a neighbour's
work included: on a shared machine the figures move with it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial
from pathlib import Path

from .processes import run_together

# A Redis database of its own: the test suite empties its own (15) as it runs.
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/10")

from .cpu import mariadb_pid  # noqa: E402
from .persist_fill import streams_spread, voucher_filled  # noqa: E402
from .purchase import setup_django  # noqa: E402  (after REDIS_URL: it sets the settings up)

BATCH = 500


def machine_cpu() -> float:
    """CPU seconds the whole machine has spent busy so far (``/proc/stat``: user, nice,
    system and interrupts; not idle, I/O wait or time stolen by the host), whoever spent them."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:7]) - idle) / os.sysconf("SC_CLK_TCK")


def _drain(item_id: int, states: tuple[int, ...], name: str, prepared: bool, start, results) -> None:
    from django.db import connections

    from inventory.redis_lua.client import reservations_client
    from inventory.redis_lua.drain import drain_group
    from inventory.redis_lua.persist import reservations_persist
    from inventory.redis_lua.records_insert import RecordsInsert
    from orders.models import Order
    from orders.product import VOUCHER

    reservations = reservations_client()

    def persisted(ids: list[int]) -> set[int]:
        return set(Order.objects.filter(reservation__in=ids).values_list("reservation", flat=True))

    def step(group_id: int, batch: int):
        # As inventory.redis_lua.item_states.item_reservations_persist; not ``prepared``: the
        # INSERT built inside the transaction, as bulk_create builds it.
        insert = RecordsInsert(VOUCHER, item_id)
        return reservations_persist(
            group_id=group_id, reservations=reservations, consumer=name, persisted=persisted, write=insert.write,
            prepare=insert.prepare if prepared else None, batch=batch,
        )  # fmt: skip

    start.wait()
    began, cpu = time.monotonic(), time.process_time()
    handled = 0
    for state in states:
        step_of = partial(step, state)
        handled += drain_group(state, step_of, reservations=reservations, batch=BATCH, stay_seconds=0)
    results.put((name, handled, began, time.monotonic(), time.process_time() - cpu))
    connections.close_all()


def one_round(
    consumers: int,
    reservations_count: int,
    buyers: list[int],
    database: int | None,
    *,
    prepared: bool = True,
    buckets: int = 1,
) -> dict:
    """A fresh voucher's ``reservations_count`` reservations drained by ``consumers`` processes
    (``prepared``: each batch's INSERT built before its transaction, as the workers do), spread
    over the streams of its ``buckets`` states."""
    from django.db import connections

    from harness.server import process_tree_cpu
    from inventory.redis_lua.client import reservations_client
    from inventory.redis_lua.values import GroupKeys
    from orders.models import Order

    voucher, states = voucher_filled(reservations_count, buyers, buckets)
    reservations = reservations_client()
    redis_pid = int(reservations.client.info("server")["process_id"])
    connections.close_all()  # each consumer opens its own
    cpu_before = (process_tree_cpu(database) if database else 0.0, process_tree_cpu(redis_pid), machine_cpu())
    streams = streams_spread(consumers, states)
    outcomes = run_together(
        _drain, [(voucher.pk, mine, f"bench-{n}", prepared) for n, mine in enumerate(streams)], timeout=600
    )
    cpu_after = (process_tree_cpu(database) if database else 0.0, process_tree_cpu(redis_pid), machine_cpu())
    seconds = max(end for *_, end, _ in outcomes) - min(began for *_, began, _, _ in outcomes)
    written = Order.objects.filter(voucher=voucher).count()
    assert written == reservations_count == sum(handled for _, handled, *_ in outcomes), (written, outcomes)
    for state in states:
        assert reservations.waiting(group_id=state) == 0
        reservations.client.delete(*GroupKeys.of(state).all())
    return {
        "rows_per_second": written / seconds,
        "seconds": seconds,
        "database_cpu": cpu_after[0] - cpu_before[0],
        "redis_cpu": cpu_after[1] - cpu_before[1],
        "consumers_cpu": sum(cpu for *_, cpu in outcomes),
        "machine_cpu": cpu_after[2] - cpu_before[2],
        "rows": written,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reservations", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--consumers", default="1,2,4", help="comma-separated consumer counts; the first is the baseline"
    )
    parser.add_argument(
        "--buckets", type=int, default=1, help="the voucher's buckets: a row, a state and a stream each"
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.consumers.split(",")]
    setup_django()
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from harness.machine import describe
    from inventory.redis_lua.client import reservations_client

    settings.RESERVATIONS_PERSIST_CONSUMERS = max(counts)  # every consumer of a run holds the lock at once
    model = get_user_model()
    prefix = "persist-bench"
    have = model.objects.filter(username__startswith=prefix).count()
    model.objects.bulk_create(
        (model(username=f"{prefix}-{n}") for n in range(have, args.reservations)), batch_size=5000
    )
    buyers = list(model.objects.filter(username__startswith=prefix).order_by("pk").values_list("pk", flat=True))
    database = mariadb_pid()
    print(describe(reservations_client().client))
    spread = f"over {args.buckets} bucket states' streams, evenly" if args.buckets > 1 else "in one stream"
    print(
        f"one voucher, {args.reservations:,} reservations waiting {spread}, batches of {BATCH}; MariaDB "
        f"{'pid ' + str(database) if database else 'not found on this machine (its CPU is not counted)'}; "
        f"log level {settings.LOG_LEVEL}; {args.rounds} rounds, medians"
    )
    # Each consumer count as the workers persist, and two consumers building each INSERT inside
    # its transaction (what the stock rows' lock then serialises), for comparison.
    contenders = [(n, True) for n in counts] + [(2, False)]
    runs: dict[tuple[int, bool], list[dict]] = {one: [] for one in contenders}
    for round_number in range(args.rounds):
        for consumers, prepared in contenders if round_number % 2 == 0 else contenders[::-1]:
            run = one_round(consumers, args.reservations, buyers, database, prepared=prepared, buckets=args.buckets)
            runs[consumers, prepared].append(run)
            how = "" if prepared else ", INSERT built in the transaction"
            print(f"  round {round_number + 1}, {consumers} consumers{how}: {run['rows_per_second']:,.0f} rows/s")
    base = statistics.median(run["rows_per_second"] for run in runs[contenders[0]])
    cores = os.cpu_count() or 1
    print()
    print(
        "| consumers | rows/s | ratio to 1 | each round's ratio, median "
        "| CPU s per 10,000 rows: MariaDB | consumers | Redis "
        "| cores busy: these three | the whole machine |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for consumers, prepared in contenders:
        these = runs[consumers, prepared]
        median = {key: statistics.median(run[key] for run in these) for key in these[0]}
        per = 10_000 / median["rows"]
        busy = (median["database_cpu"] + median["consumers_cpu"] + median["redis_cpu"]) / median["seconds"]
        how = "" if prepared else ", INSERT built in the transaction"
        # Rounds run the contenders back to back: a neighbour's load hits a round's alike.
        baseline = runs[contenders[0]]
        ratios = [run["rows_per_second"] / first["rows_per_second"] for run, first in zip(these, baseline, strict=True)]
        print(
            f"| {consumers}{how} | {median['rows_per_second']:,.0f} | {median['rows_per_second'] / base:.2f} "
            f"| {statistics.median(ratios):.2f} "
            f"| {median['database_cpu'] * per:.2f} | {median['consumers_cpu'] * per:.2f} "
            f"| {median['redis_cpu'] * per:.2f} "
            f"| {busy:.2f} of {cores} | {median['machine_cpu'] / median['seconds']:.2f} |"
        )


if __name__ == "__main__":
    main()
