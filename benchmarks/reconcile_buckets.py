"""What the beat's reconciliation of a bucketed ``redis_lua`` voucher costs with many records:
the totals first (what the beat runs) against the comparison per user (what it ran every
time before, and still runs on a difference or once per ``RESERVATIONS_RECONCILE_FULL_SECONDS``).

    .venv/bin/python -m benchmarks.reconcile_buckets [--records 100000] [--buckets 8] [--runs 5]

The database (``DATABASE_URL``, by default ``bench_periodic``) gets, once per size and kept
for the next run, a ``redis_lua`` voucher of ``--buckets`` buckets (a state each) with
``--records`` orders in every status by as many buyers (``benchmarks.periodic``), its states
loaded from them. Printed per way: the median milliseconds of a check with the states whole,
the queries one made, and whether it compared each user.
"""

from __future__ import annotations

import argparse
import sys

from .periodic import _users, _voucher, measured


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000, help="orders of the voucher")
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)

    from .purchase import setup_django

    setup_django()
    from inventory.redis_lua.client import reservations_client
    from inventory.redis_lua.item_states import item_reservations_check, item_reservations_load
    from orders.product import VOUCHER

    _users(args.records)
    voucher = _voucher(args.records, buckets=args.buckets)
    reservations = reservations_client()
    item_reservations_load(VOUCHER, item=voucher, reservations=reservations)
    first = item_reservations_check(VOUCHER, item=voucher, reservations=reservations)  # marks it whole
    assert first.state and not first.drifted, first.as_dict()
    print(f"{args.records:,} orders, {args.buckets} states; {args.runs} runs each")
    print(f"{'check':<22}  {'ms/run':>8}  {'queries':>7}  per user")
    for name, totals_first in (("totals first (beat)", True), ("per user", False)):

        def check(totals_first=totals_first):
            return item_reservations_check(VOUCHER, item=voucher, reservations=reservations, totals_first=totals_first)

        ms, queries = measured(check, args.runs)
        print(f"{name:<22}  {ms:>8.1f}  {queries:>7}  {check().per_user}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
