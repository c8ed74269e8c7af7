"""The benchmarks' tables: requests per second against a base, latencies and answers, and
CPU per request served; and the progress lines, on stderr so that the report stays clean."""

from __future__ import annotations

import statistics
import sys
from collections import Counter

from .cpu import Run


def say(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def answers(runs: list[Run]) -> str:
    statuses, codes = Counter(), Counter()
    for run in runs:
        statuses += run.tally.statuses
        codes += run.tally.codes
    text = ", ".join(f"{status or 'none'} x {n:,}" for status, n in sorted(statuses.items()))
    if codes:
        text += " (" + ", ".join(f"{code} {n:,}" for code, n in codes.most_common()) + ")"
    if any(run.tally.ran_out for run in runs):
        text += "; the buyers ran out: raise --tokens"
    return text


def median(runs: list[Run], value) -> float:
    return statistics.median(value(run) for run in runs)


def run_rate(run: Run) -> float:
    return run.tally.rate


def report_rates(title: str, runs: dict[str, list[Run]], base: str, target: float, stock: int = 0) -> None:
    """Requests per second (median, and each round's), the ratio to ``base``, latencies, answers;
    with ``stock``, also when the last unit was sold."""
    base_rate = median(runs[base], run_rate)
    print(title)
    sold_out = f"{'sold out':>10}" if stock else ""
    print(
        f"{'':<26}{'req/s':>8}  {'rounds':<18}{'ratio':>7}  {'target':<8}{'p50 ms':>7}{'p99 ms':>8}{sold_out}  answers"
    )
    for name, one in runs.items():
        rate = median(one, run_rate)
        each = ", ".join(f"{run_rate(run):,.0f}" for run in one)
        ratio = f"{rate / base_rate:.2f}x" if base_rate else "-"
        wanted = "" if name == base else f">= {target:g}x"
        p50 = median(one, lambda run: run.tally.percentile(0.50))
        p99 = median(one, lambda run: run.tally.percentile(0.99))
        line = f"{name:<26}{rate:>8,.0f}  {each:<18}{ratio:>7}  {wanted:<8}{p50:>7.1f}{p99:>8.1f}"
        if stock:
            sold_all = all(
                sum(n for status, n in r.tally.statuses.items() if 200 <= status < 300) >= stock for r in one
            )
            line += f"{median(one, lambda run: run.tally.last_taken):>8.2f} s" if sold_all else f"{'not yet':>10}"
        print(f"{line}  {answers(one)}")
    print()


def report_cpu(runs: dict[str, list[Run]], *, base: str) -> None:
    print("CPU ms per request served (medians of the rounds). server: gunicorn's master and workers;")
    print("client: this process; MariaDB and Redis: also whatever else uses them; busy: the whole machine")
    parts = ("server", "client", "mariadb", "redis")
    ping = median(runs[base], lambda run: run.ms_per_request("server"))
    print(f"{'':<26}{'server':>8}{'x ping':>8}{'client':>8}{'MariaDB':>9}{'Redis':>7}{'busy':>7}")
    for name, one in runs.items():
        server, client, mariadb, redis_ = (median(one, lambda run, p=p: run.ms_per_request(p)) for p in parts)
        busy = median(one, lambda run: run.machine_busy)
        print(f"{name:<26}{server:>8.2f}{server / ping:>7.1f}x{client:>8.2f}{mariadb:>9.2f}{redis_:>7.2f}{busy:>7.0%}")
    print()
