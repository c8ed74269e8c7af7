"""What a read of the token revocations costs (``accounts.tokens.Revocations``) on a site with
many users holding tokens, against the read as it was: every token of every inactive user,
``accounts_apitoken`` joined to ``auth_user``, which each process ran once a second.

    .venv/bin/python -m benchmarks.revocations [--sizes 10000,200000] [--rounds 5]
        [--inactive-every 100] [--database-url mysql://root:@127.0.0.1:3306/flashsale_bench_revocations]

For each size, the database's users and tokens are made anew in bulk (MariaDB's sequence
engine, ``seq_1_to_N``: a database of the benchmark's own, whose name holds ``bench``, as
everything of it is deleted), one token per user ending in 30 days; one user in
``--inactive-every`` is deactivated by an ``UPDATE`` (the triggers record each change, as
they do for a ``QuerySet.update``) and as many other users have a token revoked (a
``TokenCutoff`` each). Then,
each the median of ``--rounds``, in milliseconds:

- before: the read of the inactive users as it was (every token of theirs, read anew each
  time; the revocations since the last read are left out of it, read now as they are
  after);
- first read: what a process that has just started reads (every revocation and every
  change that has not ended);
- refresh, just after: a read a second later, while every deactivation above is less than
  a minute old (a read looks a minute back: ``accounts.tokens.OVERLAP``);
- refresh, nothing new: a read two minutes later, nothing changed since (the process's
  clock moved on: the steady state of a site).

Nothing is asserted; ``tests/test_tokens.py`` checks the plan and the queries.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from harness.django_setup import setup_django
from harness.machine import describe

from .report import say


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,200000", help="users, each with a token, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inactive-every", type=int, default=100, help="one user in this many deactivated")
    parser.add_argument("--database-url", default="mysql://root:@127.0.0.1:3306/flashsale_bench_revocations")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--broker-url", default=None)
    return parser.parse_args(argv)


def site_make(users: int, inactive_every: int) -> None:
    """``users`` users with a token each, one in ``inactive_every`` deactivated, as many
    tokens revoked: everything the database held before is gone."""
    from django.db import connection

    tables = ["accounts_activechange", "accounts_tokencutoff", "accounts_apitoken", "auth_user_groups",
              "auth_user_user_permissions", "auth_user"]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("SET FOREIGN_KEY_CHECKS = 0")
        for table in tables:
            cursor.execute(f"TRUNCATE TABLE {table}")
        cursor.execute("SET FOREIGN_KEY_CHECKS = 1")
        cursor.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff,"
            " is_active, date_joined)"
            f" SELECT '!', 0, CONCAT('bench-', seq), '', '', '', 0, 1, UTC_TIMESTAMP(6) FROM seq_1_to_{users}"
        )
        cursor.execute(
            "INSERT INTO accounts_apitoken (user_id, key_hash, stamp, created_at, expires_at)"
            " SELECT id, SHA2(CONCAT('token-', id), 256), 2, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 DAY"
            " FROM auth_user"
        )
        cursor.execute(f"UPDATE auth_user SET is_active = 0 WHERE id % {inactive_every} = 0")
        cursor.execute(
            "INSERT INTO accounts_tokencutoff (user_id, stamp, spared, changed_at, expires_at)"
            " SELECT id, 1, '', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 DAY"
            f" FROM auth_user WHERE id % {inactive_every} = 1"
        )
        for table in tables:
            cursor.execute(f"ANALYZE TABLE {table}")
            cursor.fetchall()


def read_before() -> None:
    """The read of the inactive users as it was (``accounts/tokens.py`` before ``ActiveChange``)."""
    from django.utils import timezone

    from accounts.models import ApiToken

    started = timezone.now()
    frozenset(ApiToken.objects.filter(user__is_active=False, expires_at__gt=started).values_list("key_hash", flat=True))


def timed(rounds: int, run) -> float:
    """The median of ``rounds`` runs of ``run()``, in milliseconds."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(users: int, args) -> dict[str, float]:
    from accounts import tokens

    say(f"making {users:,} users and tokens ...")
    site_make(users, args.inactive_every)
    figures = {"before": timed(args.rounds, read_before)}

    def first():
        tokens.Revocations()._read()

    figures["first read"] = timed(args.rounds, first)
    process = tokens.Revocations()
    process._read()
    figures["refresh, just after"] = timed(args.rounds, process._read)
    real = tokens.revocations_clock
    tokens.revocations_clock = lambda: real() + 2 * tokens.OVERLAP
    try:
        process._read()
        figures["refresh, nothing new"] = timed(args.rounds, process._read)
    finally:
        tokens.revocations_clock = real
    assert len(process._inactive) == users // args.inactive_every, "every inactive user is known"
    assert len(process._cutoffs) == (users + args.inactive_every - 1) // args.inactive_every, "every cutoff is known"
    return figures


def main(argv=None) -> int:
    args = parse_args(argv)
    if "bench" not in args.database_url.rsplit("/", 1)[-1]:
        sys.exit("--database-url must name a benchmark's own database (its name holding 'bench'): it is emptied")
    setup_django(args)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        mariadb = cursor.fetchone()[0]
    sizes = [int(size) for size in args.sizes.split(",")]
    results = {size: measure(size, args) for size in sizes}
    print("# Token revocations: a read's cost, before and after\n")
    print(f"machine: {describe()}; MariaDB {mariadb}")
    every = args.inactive_every
    print(f"one user in {every} inactive, as many with a token revoked; medians of {args.rounds} reads, ms\n")
    names = ["before", "first read", "refresh, just after", "refresh, nothing new"]
    print(f"{'users and tokens':<18}" + "".join(f"{name:>22}" for name in names))
    for size, figures in results.items():
        print(f"{size:<18,}" + "".join(f"{figures[name]:>22.2f}" for name in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
