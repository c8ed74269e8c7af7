"""The waiting room's costs: joining and polling a queue against the server's ping, a take with its
ticket checked against the same take on an open item, and the memory of 100,000 waiting buyers.

    .venv/bin/python -m benchmarks.admission [--seconds 4] [--rounds 2] [--concurrency 50]
        [--server-processes 4] [--waiters 100000] [--tokens 100000]
        [--database-url mysql://root:@127.0.0.1:3306/flashsale_bench]
        [--redis-url redis://127.0.0.1:6379/5] [--broker-url redis://127.0.0.1:6379/6]

The server and the client are the HTTP benchmark's (``benchmarks.http``: gunicorn with
``--server-processes`` sync workers, the epoll client in this process, each request by a
bearer token of its own buyer), and so are the options.

1. Requests per second, each run against ``GET /api/ping`` in the same round: ``POST .../queue``
   (every request a new buyer joining), ``GET .../queue`` (buyers who joined, polling), and a
   purchase under ``redis_lua``, then under ``db_atomic``, on an open voucher and on a voucher
   with a waiting room, each buyer with the ticket the room gave them (admitted beforehand, in
   this process).
2. The server's CPU per request of each (gunicorn's master and workers), and the ticket's
   cost: the take with its ticket checked against the take on the open voucher.
3. Memory: ``--waiters`` buyers join one voucher's room (pipelined joins, as many requests would
   make them); Redis's ``MEMORY USAGE`` of each of its keys, the growth of ``used_memory``, and
   the bytes per waiting buyer.

Runs alternate over the rounds; figures are medians. Nothing is asserted: the targets are
printed beside the figures (a poll or a join at least 0.5x ping; the ticket at most 1.05x CPU).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

from harness.django_setup import setup_django
from harness.machine import describe

from .client import get_requests, post_requests
from .context import Context
from .cpu import CpuMeter, Run
from .http import parse_args, rounds, server_running
from .persisting import broker_purge
from .report import median, report_cpu, report_rates, say
from .seeding import AMPLE, Items, buyer_tokens

RATE_TARGET = 0.5  # a join and a poll, each against ping
TICKET_TARGET = 1.05  # the server's CPU of a take with its ticket, against one without

PING, JOIN, POLL = "GET /api/ping", "POST queue (join)", "GET queue (poll)"
OPEN, TICKETED = "purchase, open", "purchase, with ticket"
ATOMIC_OPEN, ATOMIC_TICKETED = "db_atomic purchase, open", "db_atomic purchase, ticket"
RUNS = [PING, JOIN, POLL, OPEN, TICKETED, ATOMIC_OPEN, ATOMIC_TICKETED]
# Each purchase pair's strategy: redis_lua's take is one script call, so the ticket's round
# trip weighs most there; db_atomic's is a transaction, and weighs less.
STRATEGY = {OPEN: "redis_lua", TICKETED: "redis_lua", ATOMIC_OPEN: "db_atomic", ATOMIC_TICKETED: "db_atomic"}
# The most requests one run can serve here, with room to spare: each buyer's ticket is made
# before the run that spends it.
PER_RUN = 20_000


def authorised(
    method: str, path: str, port: int, tokens: list[str], headers: list[str] | None = None
) -> Iterator[bytes]:
    """One request per token (with ``headers[n]`` added to the n-th), a connection each."""
    for n, token in enumerate(tokens):
        extra = headers[n] if headers else ""
        yield (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n"
            f"Authorization: Bearer {token}\r\n{extra}\r\n"
        ).encode()


class Buyers:
    """Slices of the buyers' tokens, a fresh one for each run that must not repeat a buyer."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.next = tokens, 0

    def take(self, count: int) -> list[str]:
        if self.next + count > len(self.tokens):
            self.next = 0
        chunk = self.tokens[self.next : self.next + count]
        self.next += count
        return chunk


def queued_voucher(strategy: str, items: Items, rate: float = 10_000.0):
    from orders.selectors import voucher_get
    from orders.services import voucher_create

    window = items._window()
    voucher = voucher_create(
        title=f"bench admission {strategy}", stock=AMPLE, strategy=strategy, listed=False, admission="queue",
        admission_rate=rate, admission_ticket_seconds=3_600, **window,
    )  # fmt: skip
    if strategy == "redis_lua":
        items.groups.append(voucher.group_id)
    return voucher_get(voucher_id=voucher.pk)


def admitted_tickets(voucher, tokens: list[str]) -> list[str]:
    """Each token's buyer joined and admitted to ``voucher``'s room: their tickets."""
    from accounts.tokens import token_claims
    from inventory.admission.room import room_enter, room_join_many
    from orders.product import VOUCHER

    users = [token_claims(token).user_id for token in tokens]
    room_join_many(VOUCHER, voucher, users)
    tickets = []
    for user in users:
        standing = room_enter(VOUCHER, voucher, user_id=user, join=False)
        while standing.status != "admitted":  # each call admits what the rate earned since the last
            standing = room_enter(VOUCHER, voucher, user_id=user, join=False)
        tickets.append(standing.ticket)
    return tickets


def http_run(name: str, context: Context, buyers: Buyers, seconds: float) -> Run:
    port, items = context.server.port, context.items
    if name == PING:
        return context.measure(get_requests("/api/ping", port), seconds)
    if name in (JOIN, POLL):
        # Polled at 0.1 admissions a second: nearly everyone polling is waiting, as in a surge.
        voucher = queued_voucher("db_atomic", items, rate=0.1 if name == POLL else 10_000.0)
        tokens = buyers.take(PER_RUN)
        if name == POLL:
            from accounts.tokens import token_claims
            from inventory.admission.room import room_join_many
            from orders.product import VOUCHER

            room_join_many(VOUCHER, voucher, [token_claims(token).user_id for token in tokens])
            return context.measure(authorised("GET", f"/api/vouchers/{voucher.pk}/queue", port, tokens * 20), seconds)
        return context.measure(authorised("POST", f"/api/vouchers/{voucher.pk}/queue", port, tokens), seconds)
    tokens = buyers.take(PER_RUN)
    if name in (OPEN, ATOMIC_OPEN):
        voucher_id, _ = items.voucher(STRATEGY[name], AMPLE)
        return context.measure(post_requests(f"/api/vouchers/{voucher_id}/purchase", port, tokens), seconds)
    voucher = queued_voucher(STRATEGY[name], items)
    headers = [f"Admission-Ticket: {ticket}\r\n" for ticket in admitted_tickets(voucher, tokens)]
    return context.measure(authorised("POST", f"/api/vouchers/{voucher.pk}/purchase", port, tokens, headers), seconds)


def memory_report(waiters: int, redis_client, items: Items) -> None:
    from inventory.admission.keys import RoomKeys
    from inventory.admission.room import room_clear, room_join_many
    from orders.product import VOUCHER

    voucher = queued_voucher("db_atomic", items, rate=0.1)  # all of them wait
    before = redis_client.info("memory")["used_memory"]
    started = time.perf_counter()
    room_join_many(VOUCHER, voucher, range(1, waiters + 1), now=voucher.begin_at + timedelta(seconds=1))
    took = time.perf_counter() - started
    keys = RoomKeys.of(VOUCHER.kind, voucher.pk)
    sizes = {key.rsplit(":", 1)[1]: redis_client.memory_usage(key, samples=0) or 0 for key in keys.all}
    grown = redis_client.info("memory")["used_memory"] - before
    room_clear(VOUCHER, voucher.pk)
    total = sum(sizes.values())
    print(f"Memory of {waiters:,} waiting buyers in one room (MEMORY USAGE, exact):")
    print("  " + ", ".join(f"{name} {size:,} B" for name, size in sizes.items()))
    per_buyer = total / waiters
    print(f"  total {total:,} B = {total / 2**20:.1f} MiB, {per_buyer:.0f} B per buyer; used_memory grew {grown:,} B")
    print(f"  joined in {took:.1f} s, pipelined ({waiters / took:,.0f} joins/s through the join's script)\n")


def main(argv=None) -> int:
    import argparse

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--waiters", type=int, default=100_000)
    known, rest = extra.parse_known_args(argv)
    args = parse_args(rest)
    setup_django(args)
    import redis

    tokens = buyer_tokens(args)
    redis_client = redis.Redis.from_url(args.redis_url)
    print("# Admission: the waiting room's join, poll and ticket against ping and an open take; its memory\n")
    print(f"machine: {describe(redis_client)}")
    print(
        f"server: gunicorn, {args.server_processes} sync workers on 127.0.0.1; client: epoll in this process, "
        f"{args.concurrency} requests in flight; {args.seconds:g} s per run, {args.rounds} rounds\n"
    )
    items = Items()
    buyers = Buyers(tokens)
    try:
        memory_report(known.waiters, redis_client, items)
        with server_running(args) as server:
            context = Context(args, server, CpuMeter(server.pid, redis_client), items, tokens)
            say("warming up every path ...")
            for name in RUNS:
                http_run(name, context, buyers, 0.5)
            runs = rounds(RUNS, args.rounds, lambda name: http_run(name, context, buyers, args.seconds))
    finally:
        items.drop()
        broker_purge(args.broker_url)
    report_rates("Requests per second (ratio to ping)", runs, PING, RATE_TARGET)
    report_cpu(runs, base=PING)
    for strategy, (open_run, ticketed_run) in (
        ("redis_lua", (OPEN, TICKETED)),
        ("db_atomic", (ATOMIC_OPEN, ATOMIC_TICKETED)),
    ):
        ticketed = median(runs[ticketed_run], lambda run: run.ms_per_request("server"))
        plain = median(runs[open_run], lambda run: run.ms_per_request("server"))
        print(
            f"The ticket's cost under {strategy}: {ticketed:.3f} ms of the server's CPU per purchase with its ticket "
            f"checked, {plain:.3f} ms without: {ticketed / plain:.3f}x (target at most {TICKET_TARGET}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
