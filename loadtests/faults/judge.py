"""The verdict of one fault run: pure functions over the answers and the matrix's audit
(no Django, no I/O), tested on their own (``tests/loadtests/test_fault_judge.py``).

A fault run holds when, besides every invariant of the matrix (``loadtests.verdict``:
nothing oversold, no duplicates, every confirmation found once, Redis in step):

- no answer was a 500, or any status but the documented ones, 503 ``unavailable`` (with
  Retry-After: the locustfiles check it) among them, and no answer was missing (status 0,
  a dropped connection) unless the fault kills a process that serves requests;
- no answer took longer than ``ANSWER_WITHIN_SECONDS``: a dependency down is answered
  503 quickly, never by a request that hangs;
- the server recovered on its own: after the fault ended, only documented answers came
  again, within the fault's bound (``recover_within``), and, for a deferred strategy, the
  worker wrote records again.

A run whose items hold their takes (``--hold-seconds``, the lifecycle's faults) is also
judged once it has drained, no record held any more (``Lifecycle``, ``lifecycle_broken``):
available + held + settled == supply, no unit returned twice, no record both settled and
released, every payment confirmation one paid order or one refund, and Redis in step with
the database after the releases' returns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ..verdict import REDIS_DRIFT, Result, broken_invariants

# A request that waits for a dependency longer than this has hung: the clients' timeouts
# (locking.integration.locks_redis, the cache's, the database's) bound it below.
ANSWER_WITHIN_SECONDS = 5.0
# The statuses a purchase or a draw may answer with, refusals and 503 included.
DOCUMENTED = {201, 202, 403, 409, 503}
NO_ANSWER = 0


@dataclass(frozen=True)
class Answer:
    at: float  # time.time() when it came
    status: int  # 0: none, the connection dropped
    seconds: float  # how long it took


@dataclass(frozen=True)
class Recovery:
    """How the run came back: ``seconds`` from the fault's end until the last answer that
    was not a documented one other than 503 (0 when there was none after it), or None
    when no documented answer other than 503 followed it."""

    seconds: float | None
    # Seconds from the fault's end until the worker wrote records again (deferred
    # strategies; None when it never did, or for the others).
    writes_seconds: float | None = None


def parse_answers(lines: Iterable[str]) -> list[Answer]:
    """``<time> <status> <seconds>`` lines (``loadtests.common.OutcomeLog.answered``)."""
    answers = []
    for line in lines:
        words = line.split()
        if len(words) == 3:
            answers.append(Answer(at=float(words[0]), status=int(words[1]), seconds=float(words[2])))
    return sorted(answers, key=lambda answer: answer.at)


def by_status(answers: Iterable[Answer]) -> dict[int, int]:
    return dict(sorted(Counter(answer.status for answer in answers).items()))


def answered_within(answers: Iterable[Answer], start: float, end: float) -> list[Answer]:
    """The answers to requests sent at ``start`` or later and answered by ``end``: those
    that met one state of a fault from beginning to end."""
    return [a for a in answers if a.at - a.seconds >= start and a.at <= end]


def degraded(answer: Answer) -> bool:
    """An answer that says the server is not selling: 503, a 5xx, or none at all."""
    return answer.status == NO_ANSWER or answer.status >= 500


def recovery(answers: list[Answer], *, injected_at: float, healed_at: float) -> float | None:
    """Seconds from ``healed_at`` (the fault's end) until the last degraded answer since
    ``injected_at`` (0 when it came before the end, or there was none), or None when no
    answer but degraded ones came after it: the server never answered normally again."""
    last_degraded = max((a.at for a in answers if degraded(a) and a.at >= injected_at), default=None)
    if last_degraded is None:
        return 0.0
    if not any(a.at > last_degraded and not degraded(a) for a in answers):
        return None
    return max(0.0, last_degraded - healed_at)


def writes_recovery(taken: list[tuple[float, int]], *, healed_at: float) -> float | None:
    """Seconds from ``healed_at`` until the records taken grew again, from ``(time, taken)``
    samples; 0 when they grew before it, None when they never grew after the last sample
    before it."""
    before = [count for at, count in taken if at <= healed_at]
    baseline = before[-1] if before else 0
    for at, count in taken:
        if at > healed_at and count > baseline:
            return at - healed_at
    return None


def fault_verdict(
    result: Result,
    answers: list[Answer],
    recovered: Recovery,
    *,
    drops_requests: bool,
    recover_within: float,
    deferred: bool,
    documented_losses: int = 0,
    fault_broken: Iterable[str] = (),
    notes: Iterable[str] = (),
) -> tuple[str, bool]:
    """(verdict, ok) of one fault run. ``documented_losses`` is how many 202s the fault
    took away with it by design (a Redis restarted empty while they waited in it); the
    caller leaves them out of ``result.lost_confirmations`` and they are only reported.
    ``fault_broken`` are the rules of the fault's own that the run broke, ``notes`` what
    it saw besides, said after the verdict."""
    broken = broken_invariants(result)
    if not result.totals_agree:
        broken.append("the running totals disagree with the records")
    statuses = by_status(answers)
    undocumented = {status: n for status, n in statuses.items() if status not in DOCUMENTED}
    # The locustfiles count every undocumented status as a failure, and a malformed body too,
    # and on paths that log no status here (a waiting room's, a restock's, a tab's) or none
    # at all (a task's exception: ``loadtests.task_errors``) any error.
    malformed = result.failures - sum(undocumented.values())
    if drops_requests:
        undocumented.pop(NO_ANSWER, None)
    if undocumented:
        broken.append("answered " + ", ".join(f"{n} x {status or 'no answer'}" for status, n in undocumented.items()))
    slow = [a for a in answers if a.status == 503 and a.seconds > ANSWER_WITHIN_SECONDS]
    if slow:
        broken.append(f"{len(slow)} answers 503 after more than {ANSWER_WITHIN_SECONDS:.0f} s")
    hung = [a for a in answers if a.status == NO_ANSWER and a.seconds > ANSWER_WITHIN_SECONDS * 2]
    if hung:
        broken.append(f"{len(hung)} requests hung")
    if recovered.seconds is None:
        broken.append("did not recover")
    elif recovered.seconds > recover_within:
        broken.append(f"recovered in {recovered.seconds:.1f} s, over {recover_within:.0f} s")
    if deferred and recovered.writes_seconds is None:
        broken.append("the worker wrote nothing after the fault")
    if malformed > 0:
        broken.append(f"{malformed} malformed answers or other errors")
    broken += fault_broken
    said = "".join(f"; {note}" for note in notes)
    if broken:
        return "BROKEN: " + ", ".join(broken) + said, False
    if documented_losses:
        return f"holds ({documented_losses} pending 202s lost with Redis' memory, as documented){said}", True
    return f"holds{said}", True


@dataclass(frozen=True)
class Lifecycle:
    """A run with a hold window once every hold has drained (or the wait ran out), as its
    audit read it (``lifecycle.drained``)."""

    hold_seconds: int
    # Seconds the run waited after its audit until nothing was held or waiting; None when
    # the wait ran out first.
    drain_s: float | None
    supplied: int
    available: int
    held: int
    settled: int
    released: int
    returned_twice: int
    settled_and_released: int
    # available + held + settled == supplied (a pool's: per prize).
    conserved: bool
    # A voucher's payments (``payments.selectors.payments_audit``); None for a pool.
    payments: dict | None = None
    # Redis against the database once drained (``redis_lua``; None for the others): whether
    # it had a state, and how many rows, users and take numbers differed.
    redis_state: bool | None = None
    redis_drift: dict[str, int] | None = None
    # Units a missed return left out of Redis, put back by reconciliation as documented
    # (a releaser killed between its commit and its return).
    returns_repaired: int = 0


def lifecycle_broken(life: Lifecycle) -> list[str]:
    """The lifecycle's invariants a drained run broke."""
    broken = []
    if life.drain_s is None or life.held:
        broken.append(f"{life.held} records still held after the drain")
    if not life.conserved:
        broken.append(
            f"available + held + settled != supply ({life.available} + {life.held} + {life.settled} vs {life.supplied})"
        )
    if life.returned_twice:
        broken.append(f"{life.returned_twice} units returned twice")
    if life.settled_and_released:
        broken.append(f"{life.settled_and_released} records both settled and released")
    payments = life.payments
    if payments is not None:
        if payments["waiting"]:
            broken.append(f"{payments['waiting']} payments never confirmed")
        if not payments["ok"]:
            broken.append(
                "payments broken: {confirmations} confirmations, {paid} paid, {refunded} refunded, {double_paid} "
                "paid twice, {paid_unsold} paid unsold, {sold_unpaid} sold unpaid, {refunds_unrecorded} refunds "
                "unrecorded".format(**payments)
            )
    if life.redis_state is False:
        broken.append("Redis state missing after the drain")
    drifted = {name: n for name, n in (life.redis_drift or {}).items() if n}
    if drifted:
        broken.append("after the releases, " + ", ".join(f"{REDIS_DRIFT[name]} ({n})" for name, n in drifted.items()))
    return broken


def lifecycle_summary(life: Lifecycle) -> str:
    """The drained run in a few words, for its row."""
    said = f"{life.hold_seconds} s: {life.released} released, {life.settled} settled, {life.held} held"
    if life.payments is not None and life.payments["confirmations"]:
        said += f"; {life.payments['paid']} paid, {life.payments['refunded']} refunded"
    if life.returns_repaired:
        said += f"; {life.returns_repaired} returns repaired"
    return said
