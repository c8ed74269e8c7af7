"""One run of the matrix: a fresh product, Locust headless against the server, a wait until
the server is quiet (under a deferred strategy, ``redis_lua``, first until a worker has
persisted every reservation; in a lifecycle scenario, until every hold and payment has
drained), the audit, the check of the run's history against its records
(``loadtests.history``), and the verdict.

Imported once Django is set up.
"""

from __future__ import annotations

import os
import threading
from argparse import Namespace
from dataclasses import asdict, replace
from pathlib import Path

from django.db import close_old_connections
from django.utils import timezone

from harness.server import ROOT, Server
from inventory.strategies import STRATEGIES

from . import lifecycle
from .admissions import admissions_figures
from .common import CONFIRMED, ERROR, accepted, crowd_exhausted, read_outcomes
from .console import say
from .history_audit import history_figures
from .locust_process import LoadRunFailed, crowd_started_at, number, run_locust
from .products import PRODUCTS, Supply
from .sales import sales_per_second
from .sampler import Observer, Sampler, from_crowd_start
from .scenarios import ADMISSION_RATE, LOCUSTFILES, Scenario
from .verdict import Result, judge


def one_run(
    args: Namespace,
    scenario: Scenario,
    strategy: str,
    server: Server,
    tokens: Path,
    staff_token: str,
    name: str,
    observe: Observer | None = None,
    stop: threading.Event | None = None,
    buckets: int = 1,
) -> Result:
    """``stop``, once set, stops the crowd before its time (``run_locust``): the run is then
    audited and judged on what it did until then. ``buckets``: the rows its item's stock is
    split into (``inventory.buckets``)."""
    product = PRODUCTS[scenario.product]
    supply = Supply(
        stock=args.stock,
        prizes=args.prizes,
        draws_per_user=args.draws_per_user,
        no_prize_weight=args.no_prize_weight,
        hold_seconds=lifecycle.hold_seconds(args, scenario.lifecycle),
        buckets=buckets,
        admission_rate=getattr(args, "admission_rate", ADMISSION_RATE) if scenario.queue else None,
        abandon=abandon_rules(args, scenario),
    )
    # --watchers for a scenario with tabs; the lab's runs and the fault runner name none.
    watchers = scenario.watchers
    if watchers and getattr(args, "watchers", None) is not None:
        watchers = args.watchers
    target = product.create(
        title=f"load {scenario.name} {strategy} {timezone.now():%H:%M:%S}",
        strategy=strategy,
        supply=supply,
        # Anonymous tabs watch the item's page: an unlisted item is not found by them.
        listed=bool(watchers),
    )
    run_dir = args.out / name
    outcomes_dir = run_dir / "outcomes"
    if outcomes_dir.exists():
        raise LoadRunFailed(f"{outcomes_dir} exists: each run needs a folder of its own")
    outcomes_dir.mkdir(parents=True)
    env = dict(os.environ)
    env.update(
        product.locust_env(target),
        LOADTEST_TOKENS=str(tokens),
        LOADTEST_OUTCOMES=str(outcomes_dir),
        LOADTEST_STAFF_TOKEN=staff_token,
        LOADTEST_WORKERS=str(args.locust_processes),
        LOADTEST_BUYERS=str(args.hammer_buyers),
        LOADTEST_WATCHERS=str(watchers),
        PYTHONPATH=str(ROOT),
    )
    deferred = STRATEGIES[strategy].deferred
    deferred_figures: dict = {}
    lifecycle_figures: dict = {}
    audit_incomplete = False
    # --stop-when-sold-out: a scenario that ends when its stock does stops its crowd once
    # nothing is left and nothing more is taken (the tests' short runs), not at --duration.
    ends_sold_out = scenario.ends_sold_out and not scenario.lifecycle
    if getattr(args, "stop_when_sold_out", False) and ends_sold_out and stop is None:
        stop = threading.Event()
        sampler = Sampler(product, target, observe, sold_out=stop)
    else:
        sampler = Sampler(product, target, observe)
    sampler.start()
    try:
        cpu_before, worker_cpu_before = server.cpu_seconds(), server.worker_cpu_seconds()
        users = args.users + watchers
        stats = run_locust(args, scenario.path, server.host, run_dir / "locust", env, users, stop)
        cpu_used = server.cpu_seconds() - cpu_before
        # The database restarted under the load (the fault runner) left this thread's
        # connection dead: checked, and opened again, before the audit reads through it.
        close_old_connections()
        if deferred:
            # The 202s the crowd heard count only once their records exist, so the run is
            # judged after the worker has written them (the sampler goes on, and the charts
            # show the records catching up).
            persisted_at = product.wait_until_persisted(target, timeout=args.drain_timeout)
            deferred_figures = drain_figures(sampler.waiting, last_answer_at(outcomes_dir), persisted_at)
            deferred_figures["unpersisted"] = product.waiting(target) + product.audit(target).pending
        if scenario.lifecycle:
            # Judged once every hold is paid, claimed or released, and every payment resolved.
            seconds = lifecycle.wait_until_drained(product, target, args.drain_timeout, say)
            lifecycle_figures["holds_drain_s"] = seconds
        elif not product.wait_until_quiet(target):
            audit_incomplete = True
            say("  still changing 30 s after the crowd stopped: audited as it stood then, so not proven")
        # The Celery worker's share: under a deferred strategy it writes what the server
        # only reserved, so its time belongs to the requests as much as the server's.
        cpu_used += server.worker_cpu_seconds() - worker_cpu_before
    finally:
        # Also when Locust failed or the run was cut short: a sampler left going would
        # read the stock four times a second for as long as its process lives.
        sampler.stop()

    # The charts' time is the crowd's: 0 when Locust started, its duration when it stopped.
    started = crowd_started_at(run_dir / "locust")
    offset = started - sampler.started_at if started is not None else 0.0
    audit = product.audit(target)
    if deferred:
        check = product.reservations_check(target)
        deferred_figures |= {
            "redis_state": check.state,
            "redis_drift": {"stock": len(check.stock), "takers": len(check.takers), "seqs_missing": check.seqs_missing},
        }
    outcomes = read_outcomes(outcomes_dir)
    history = history_figures(product, target, outcomes_dir)
    if scenario.lifecycle:
        lifecycle_figures |= lifecycle.figures(product, target, audit, outcomes, outcomes_dir)
    if scenario.honest_buyer:
        lifecycle_figures |= honest_figures(outcomes_dir, supply.abandon)
    confirmed, lost = product.confirmations(target, outcomes)
    queue_figures = admissions_figures(outcomes_dir) if scenario.queue else {}
    if deferred:
        deferred_figures["accepted"] = sum(1 for outcome in outcomes if accepted(outcome))
    # Counted from the validated answers: Locust's own table can close before the last
    # in-flight requests return.
    requests = len(outcomes)
    # Units left while buyers were refused: a lifecycle scenario counts its own (returns
    # unsold), and stock not conserved (lost updates) says nothing of the buckets.
    counted = not scenario.lifecycle and audit.figures["conserved"]
    result = Result(
        scenario=scenario.name,
        strategy=strategy,
        product=product.name,
        buckets=buckets,
        stranded=sampler.stranded(audit.figures["stock_left"], outcomes_dir) if counted else None,
        sales_per_second=sales_per_second(from_crowd_start(sampler.taken, offset)),
        requests=requests,
        failures=sum(1 for outcome in outcomes if outcome[0] == ERROR),
        confirmed=confirmed,
        lost_confirmations=lost,
        **audit.figures,
        **deferred_figures,
        **lifecycle_figures,
        **queue_figures,
        **history,
        rps=number(stats, "Requests/s"),
        p50_ms=number(stats, "50%"),
        p95_ms=number(stats, "95%"),
        p99_ms=number(stats, "99%"),
        cpu_ms_per_request=1000 * cpu_used / max(requests, 1) if server.pid is not None else None,
        race_window_ms=args.race_window_ms,
        locust_report=f"{name}/locust.html",
        crowd_ran_out=scenario.serves_the_crowd and crowd_exhausted(outcomes_dir),
        audit_incomplete=audit_incomplete,
        stock_series=from_crowd_start(sampler.stock, offset),
        taken_series=from_crowd_start(sampler.taken, offset),
        took_series=from_crowd_start(sampler.took, offset),
        supply_series=from_crowd_start(sampler.supply, offset),
        bucket_series=from_crowd_start(sampler.buckets, offset),
    )
    verdict = judge(
        result, breaks=STRATEGIES[strategy].breaks, server_processes=args.server_processes, audit_ok=audit.ok
    )
    return replace(result, **asdict(verdict))


def abandon_rules(args: Namespace, scenario: Scenario) -> dict[str, int]:
    """The cap on abandoned holds and the cooldown of the run's item, by name: none of either
    for a scenario whose buyers abandon and buy again by design; ``--abandon-limit`` and
    ``--abandon-cooldown-seconds`` where given; the item's defaults otherwise."""
    if scenario.abandons_freely:
        return {"abandon_limit": 0, "abandon_cooldown_seconds": 0}
    given = {
        "abandon_limit": getattr(args, "abandon_limit", None),
        "abandon_cooldown_seconds": getattr(args, "abandon_cooldown_seconds", None),
    }
    return {name: value for name, value in given.items() if value is not None}


def honest_figures(outcomes_dir: Path, abandon: dict[str, int]) -> dict:
    """The honest buyer's figures of a hoarding run (``locustfiles/hoarding.py``): how often
    they asked, how often they heard ``sold_out``, whether they bought; and whether the item
    capped abandoned holds or cooled them down (the defaults, unless both were given 0)."""
    answers = [line for f in outcomes_dir.glob("honest-*.txt") for line in f.read_text().split()]
    return {
        "honest_asks": len(answers),
        "honest_sold_out": answers.count("sold_out"),
        "honest_bought": CONFIRMED in answers,
        "abandon_capped": any(abandon.get(name, 1) for name in ("abandon_limit", "abandon_cooldown_seconds")),
    }


def last_answer_at(outcomes_dir: Path) -> float | None:
    """When the crowd stopped: the moment (``time.time()``) its last answer was logged, or
    None when it logged none. Locust itself takes a second or more to exit after that, a
    time in which the worker goes on writing."""
    times = [path.stat().st_mtime for path in outcomes_dir.glob("outcomes-*.txt")]
    return max(times, default=None)


def drain_figures(waiting: list[tuple[float, int]], load_end: float | None, persisted_at: float | None) -> dict:
    """``pending_at_end`` and ``drain_s`` of a deferred strategy's run, from the sampler's
    (moment, reservations waiting) and the moment the crowd stopped: what waited at the last
    sample before that moment, and the seconds from it to the first sample after it that
    found nothing waiting (else to ``persisted_at``; None when the wait ran out)."""
    if load_end is None:  # no answer at all
        return {"pending_at_end": 0, "drain_s": 0.0 if persisted_at is not None else None}
    before = [count for at, count in waiting if at <= load_end]
    after = [(at, count) for at, count in waiting if at >= load_end]
    pending_at_end = before[-1] if before else 0
    if persisted_at is None:
        return {"pending_at_end": pending_at_end, "drain_s": None}
    if pending_at_end == 0 and after and after[0][1] == 0:
        return {"pending_at_end": 0, "drain_s": 0.0}  # nothing waited on either side of the end
    emptied = next((at for at, count in after if count == 0), persisted_at)
    return {"pending_at_end": pending_at_end, "drain_s": max(0.0, emptied - load_end)}


def baseline_run(args: Namespace, server: Server) -> Result:
    """The no-op JSON endpoint of the same server: what a request costs with no stock at all."""
    cpu_before = server.cpu_seconds()
    stats = run_locust(
        args, LOCUSTFILES / "baseline.py", server.host, args.out / "baseline", dict(os.environ), args.baseline_users
    )
    cpu_used = server.cpu_seconds() - cpu_before
    requests = int(stats["Request Count"])
    return Result(
        scenario="baseline",
        strategy="no-op JSON",
        requests=requests,
        failures=int(stats["Failure Count"]),
        rps=number(stats, "Requests/s"),
        p50_ms=number(stats, "50%"),
        p95_ms=number(stats, "95%"),
        p99_ms=number(stats, "99%"),
        cpu_ms_per_request=1000 * cpu_used / max(requests, 1),
        race_window_ms=args.race_window_ms,
        verdict="baseline",
        ok=int(stats["Failure Count"]) == 0,
    )
