"""A run's row: the run's result and answers judged with its fault (``judge``), and the rows
as the Markdown table the runner prints and writes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..history import LOST
from ..verdict import Result
from .judge import (
    Answer,
    Lifecycle,
    Recovery,
    by_status,
    fault_verdict,
    lifecycle_broken,
    lifecycle_summary,
    parse_answers,
    recovery,
    writes_recovery,
)
from .kinds import Fault
from .strike import Strike, health_says_down


@dataclass
class FaultRow:
    """One row of the table."""

    fault: str
    scenario: str
    strategy: str
    requests: int
    answers: dict[int, int]
    oversold: int
    duplicates: int
    lost_confirmations: int
    pending_lost_with_redis: int
    recover_s: float | None
    writes_s: float | None
    drain_s: float | None
    health: str
    # Lock events the server counted during the run (/metrics): stale fences, leases lost.
    lock_events: dict[str, float]
    verdict: str
    ok: bool
    result: dict = field(default_factory=dict)
    # A run with holds, once drained: the hold window and what became of the holds, in words
    # ("" without), and its figures.
    holds: str = ""
    lifecycle: dict | None = None
    # 202s a fault lost by design, set aside from ``lost_confirmations`` and reported
    # (a failover without WAIT: ``Fault.reported``).
    acknowledged_lost: int = 0
    # The answers its history shows wrong (``loadtests.history``); None where not checked.
    history: int | None = None


def judged(
    args,
    fault: Fault,
    strike: Strike,
    result: Result,
    deferred: bool,
    run_dir: Path,
    events: dict[str, float],
    life: Lifecycle | None = None,
    drained: tuple[list[str], list[str]] = ([], []),
) -> FaultRow:
    """The run's row; ``life`` is a run with holds once drained, ``drained`` what the fault
    made of it (broken rules, notes)."""
    from ..common import PENDING, read_outcomes
    from ..products import PRODUCTS

    answers = answers_of(run_dir)
    result, acknowledged_lost, reported = fault.reported(result, read_outcomes(run_dir / "outcomes"))
    documented = 0
    pending_lost = fault.pending_lost()
    if pending_lost:
        product = PRODUCTS[result.product]
        accepted = {int(o[1]) for o in read_outcomes(run_dir / "outcomes") if o[-1] == PENDING}
        recorded = product.recorded(strike.target, sorted(accepted & pending_lost))
        documented = len((accepted & pending_lost) - set(recorded))
    result = replace(result, lost_confirmations=(result.lost_confirmations or 0) - documented)
    result = history_set_aside(result, documented + acknowledged_lost)
    fault_broken, notes = fault.checked(answers, events)
    notes = [*notes, *reported]
    if life is not None:
        fault_broken, notes = [*fault_broken, *lifecycle_broken(life), *drained[0]], [*notes, *drained[1]]
        if life.redis_state is not None:
            # Drained, with any missed return repaired as documented: what the run left.
            result = replace(result, redis_state=life.redis_state, redis_drift=life.redis_drift)
    recovered = Recovery(
        seconds=recovery(answers, injected_at=strike.injected_at, healed_at=strike.healed_at),
        writes_seconds=writes_recovery(
            # Every record written, released since or not: with holds, those still holding a
            # unit need not grow once the fault is over.
            [(strike.origin + at, count) for at, count in result.took_series],
            healed_at=strike.healed_at,
        )
        if deferred
        else None,
    )
    verdict, ok = fault_verdict(
        result,
        answers,
        recovered,
        drops_requests=fault.drops_requests,
        recover_within=fault.recover_within,
        # The worker must write again once the fault is over, if it was given anything to write.
        deferred=deferred and any(a.status == 202 and a.at > strike.healed_at for a in answers),
        documented_losses=documented,
        fault_broken=fault_broken,
        notes=notes,
    )
    if fault.health_names and not health_says_down(strike.health, fault.health_names):
        ok, verdict = False, f"{verdict}; /healthz did not name the {fault.health_names} as down: {strike.health}"
    pool = result.product == "pool"
    return FaultRow(
        fault=fault.name,
        scenario=result.scenario,
        strategy=result.strategy,
        requests=len(answers),
        answers=by_status(answers),
        oversold=(result.over_awarded if pool else result.oversold) or 0,
        duplicates=(result.users_over_limit if pool else result.duplicates) or 0,
        lost_confirmations=result.lost_confirmations or 0,
        pending_lost_with_redis=documented,
        recover_s=recovered.seconds,
        writes_s=recovered.writes_seconds,
        drain_s=result.drain_s,
        health=strike.health,
        lock_events=events,
        verdict=verdict,
        ok=ok,
        result={k: v for k, v in asdict(result).items() if not k.endswith("_series")},
        holds=lifecycle_summary(life) if life is not None else "",
        lifecycle=asdict(life) if life is not None else None,
        acknowledged_lost=acknowledged_lost,
        history=result.history_violations,
    )


def history_set_aside(result: Result, lost_by_design: int) -> Result:
    """The run's history with the 202s a fault lost by design (each one take its history
    finds lost) set aside, as they are from the lost confirmations."""
    rules = dict(result.history_rules or {})
    set_aside = min(rules.get(LOST, 0), lost_by_design)
    if not set_aside:
        return result
    rules[LOST] -= set_aside
    return replace(result, history_rules=rules, history_violations=(result.history_violations or 0) - set_aside)


def seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f}"


def optional_count(value: int | None) -> str:
    return "-" if value is None else str(value)


def optional(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def statuses(answers: dict[int, int]) -> str:
    return " ".join(f"{status or 'none'}: {n}" for status, n in answers.items())


HEADER = (
    "fault", "scenario", "strategy", "requests", "answers by status", "oversold", "duplicates",
    "lost confirmations", "history", "recover s", "writes s", "drain s", "holds", "verdict",
)  # fmt: skip


def table(rows: list[FaultRow]) -> str:
    """The rows as a Markdown table. ``oversold`` is over-awarded and ``duplicates`` users
    over the draw limit for a pool; ``history`` the answers the run's history shows wrong
    (``loadtests.history``), the 202s lost by design set aside; ``recover s`` counts from
    the fault's end until the last degraded answer, ``writes s`` until the worker wrote
    again, ``drain s`` from the crowd's last answer until nothing waited (both for a
    deferred strategy); ``holds`` is a run with a hold window's, once drained: the window,
    the holds released, settled and still held, and its payments."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in rows:
        lost = str(row.lost_confirmations)
        if row.pending_lost_with_redis:
            lost += f" (+{row.pending_lost_with_redis} pending in Redis)"
        if row.acknowledged_lost:
            lost += f" (+{row.acknowledged_lost} acknowledged, lost as documented)"
        cells = [
            row.fault, row.scenario, row.strategy, str(row.requests), statuses(row.answers), str(row.oversold),
            str(row.duplicates), lost, optional_count(row.history), seconds(row.recover_s), optional(row.writes_s),
            optional(row.drain_s), row.holds or "-", row.verdict,
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def answers_of(run_dir: Path) -> list[Answer]:
    return parse_answers(
        line for path in sorted((run_dir / "outcomes").glob("answers-*.txt")) for line in path.read_text().splitlines()
    )
