"""The admission ticket's CPU, in one process: a purchase with its ticket against the same
purchase on an open voucher, each request handed straight to the project's WSGI application
as gunicorn would hand it, and timed by this thread's CPU clock.

    .venv/bin/python -m benchmarks.admission_cpu [--batch 40] [--rounds 150] [--tokens 40000]
        [--rate-limits on|off] [--database-url mysql://root:@127.0.0.1:3306/flashsale_bench] [--redis-url redis://127.0.0.1:6379/5]

Why not over HTTP (``benchmarks.admission`` does that too): on two cores the server shares
the machine with the client, Redis and MariaDB, and its CPU per request moves by 20% from one
run to the next, four times what the target allows. Here nothing else runs in the thread
that is timed; Redis's and MariaDB's work is theirs, not counted.

Arms, each a batch of ``--batch`` purchases by buyers of their own, rotated through every order
in each ``--rounds`` round: ``open`` and ``open again`` (two open vouchers: their ratio is the
measurement's own noise), ``with ticket`` (a ``queue`` voucher, each buyer admitted
beforehand), under ``redis_lua`` and under ``db_atomic``. Figures: the median microseconds of
CPU per purchase of each arm, and the median over the rounds of each round's ratio to its
own ``open``. Nothing is asserted: the target (at most 1.05x) is printed beside them.

``--rate-limits on`` (the default, as the site runs) counts every purchase against the
purchase's limits, the per-address one raised past what this one address sends: a take
that counts them first spends its ticket in the same round trip. ``off`` runs as the load
tests' servers do, where the ticket's round trip is a take's only one to Redis.
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import statistics
import sys
import time

from harness.django_setup import setup_django
from harness.machine import describe

from .report import say
from .seeding import AMPLE, Items, buyer_tokens

TICKET_TARGET = 1.05
STRATEGIES = ("redis_lua", "db_atomic")
OPEN, AGAIN, TICKETED = "open", "open again", "with ticket"
ARMS = (OPEN, AGAIN, TICKETED)
# Purchases per arm before the rounds: each path's first (the item read, the scripts loaded).
WARM_UP = 20


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=40, help="purchases per arm and round")
    parser.add_argument("--rounds", type=int, default=150, help="rounds (each arm once in each)")
    parser.add_argument("--tokens", type=int, default=40_000, help="distinct buyers (one purchase each)")
    parser.add_argument(
        "--database-url", default=os.environ.get("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_bench")
    )
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_HTTP_REDIS_URL", "redis://127.0.0.1:6379/5"))
    parser.add_argument(
        "--rate-limits", choices=("on", "off"), default="on", help="count the purchases' rate limits (the default)"
    )
    parser.add_argument("--broker-url", default=None, help="the Celery broker (default: the Redis URL)")
    args = parser.parse_args(argv)
    needed = len(STRATEGIES) * len(ARMS) * (args.batch * args.rounds + WARM_UP)
    if needed > args.tokens:
        parser.error(f"{needed:,} purchases need as many buyers: raise --tokens or lower --batch or --rounds")
    return args


def environ(path: str, token: str, ticket: str | None) -> dict:
    """A WSGI request as gunicorn makes one of ``POST path`` with an empty body."""
    request = {
        "REQUEST_METHOD": "POST", "PATH_INFO": path, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": "127.0.0.1:8000", "CONTENT_LENGTH": "0",
        "REMOTE_ADDR": "127.0.0.1", "HTTP_AUTHORIZATION": f"Bearer {token}", "HTTP_CONNECTION": "close",
        "wsgi.input": io.BytesIO(b""), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
    }  # fmt: skip
    if ticket:
        request["HTTP_ADMISSION_TICKET"] = ticket
    return request


def main(argv=None) -> int:
    args = parse_args(argv)
    setup_django(args)
    import redis
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler

    from .admission import admitted_tickets, queued_voucher

    settings.RATE_LIMITS_ENABLED = args.rate_limits == "on"
    # Every purchase comes from this one address: its limit is raised past them, the user's kept.
    settings.RATE_LIMITS = {action: {**rules, "address": (10**9, 1)} for action, rules in settings.RATE_LIMITS.items()}
    tokens = iter(buyer_tokens(args))
    print("# The admission ticket's CPU in one process: a purchase with its ticket against one without\n")
    print(f"machine: {describe(redis.Redis.from_url(args.redis_url))}")
    print(
        f"the WSGI application called in this process, this thread's CPU clock; {args.batch} purchases per arm "
        f"and round, {args.rounds} rounds, the arms rotated; rate limits {args.rate_limits}\n"
    )
    app = WSGIHandler()
    answers: dict[str, int] = {}

    def start_response(status, headers, exc_info=None):
        answers[status] = answers.get(status, 0) + 1

    def served(requests: list[dict]) -> float:
        """Microseconds of this thread's CPU per request."""
        started = time.thread_time()
        for request in requests:
            b"".join(app(request, start_response))
        return (time.thread_time() - started) / len(requests) * 1e6

    items = Items()
    figures: dict[str, dict[str, list[float]]] = {}
    try:
        for strategy in STRATEGIES:
            paths = {
                OPEN: f"/api/vouchers/{items.voucher(strategy, AMPLE)[0]}/purchase",
                AGAIN: f"/api/vouchers/{items.voucher(strategy, AMPLE)[0]}/purchase",
            }
            queued = queued_voucher(strategy, items)
            paths[TICKETED] = f"/api/vouchers/{queued.pk}/purchase"
            say(f"{strategy}: admitting {args.batch * args.rounds:,} buyers ...")
            buyers = {arm: [next(tokens) for _ in range(WARM_UP + args.batch * args.rounds)] for arm in ARMS}
            tickets = admitted_tickets(queued, buyers[TICKETED])
            for arm in ARMS:
                warm = buyers[arm][-WARM_UP:]
                served([environ(paths[arm], token, tickets[-WARM_UP + n] if arm == TICKETED else None)
                        for n, token in enumerate(warm)])  # fmt: skip
            orders = list(itertools.permutations(ARMS))
            figures[strategy] = {arm: [] for arm in ARMS}
            for round_ in range(args.rounds):
                at = slice(round_ * args.batch, (round_ + 1) * args.batch)
                batches = {
                    arm: [
                        environ(paths[arm], token, ticket)
                        for token, ticket in zip(
                            buyers[arm][at], tickets[at] if arm == TICKETED else itertools.repeat(None), strict=False
                        )
                    ]
                    for arm in ARMS
                }
                for arm in orders[round_ % len(orders)]:
                    figures[strategy][arm].append(served(batches[arm]))
                if round_ % 30 == 29:
                    say(f"{strategy}: round {round_ + 1} of {args.rounds}")
    finally:
        items.drop()
    print(f"{'':<26}{'us/purchase':>12}{'x open':>9}   (answers: {answers})")
    for strategy, arms in figures.items():
        for arm in ARMS:
            ratio = statistics.median(b / a for a, b in zip(arms[OPEN], arms[arm], strict=True))
            print(f"{strategy + ', ' + arm:<26}{statistics.median(arms[arm]):>12.1f}{ratio:>8.3f}x")
        ticketed = statistics.median(b / a for a, b in zip(arms[OPEN], arms[TICKETED], strict=True))
        print(
            f"The ticket's cost under {strategy}: {ticketed:.3f}x the CPU of the purchase on an open voucher "
            f"(target at most {TICKET_TARGET}x)\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
