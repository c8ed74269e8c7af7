"""How fairly a waiting room admitted a run's crowd, from the passages its buyers logged
(``loadtests.queue_calls``): how many were admitted, told sold out or closed; the longest wait
from a join's answer to the admission seen; and the inversions. A passage a join or a poll
ended with an undocumented answer is ``error`` here, and the run's failures count it by the
``error`` outcome its answer wrote (``Result.failures``), not by these figures.

An inversion is a buyer admitted ahead of one who joined before them: a pair (a, b) where a's
join was answered before b's was sent (so that a joined first, whatever the network did), b
was admitted, and a was admitted later (a larger ticket serial) or never. Their share is
taken of every such pair, admitted or not. Counted in O(n log n): the buyers in the order
their joins were sent, each against those whose joins were answered before it (a Fenwick tree
over the order of admission).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Passage:
    sent: float
    answered: float
    serial: int | None
    seen: float | None
    status: str


def passages_read(folder: Path) -> list[Passage]:
    passages = []
    for path in sorted(folder.glob("admissions-*.txt")):
        for line in path.read_text().splitlines():
            sent, answered, serial, seen, status = line.split()
            passages.append(
                Passage(
                    float(sent),
                    float(answered),
                    None if serial == "-" else int(serial),
                    None if seen == "-" else float(seen),
                    status,
                )
            )
    return passages


class _Counts:
    """A Fenwick tree of counts over ranks 0..size-1."""

    def __init__(self, size: int) -> None:
        self.tree = [0] * (size + 1)

    def add(self, rank: int) -> None:
        rank += 1
        while rank < len(self.tree):
            self.tree[rank] += 1
            rank += rank & -rank

    def up_to(self, rank: int) -> int:
        """How many were added at ranks 0..rank."""
        total, rank = 0, rank + 1
        while rank > 0:
            total += self.tree[rank]
            rank -= rank & -rank
        return total


def inversions(passages: list[Passage]) -> tuple[int, int]:
    """(inversions, ordered pairs): see the module's docstring."""
    serials = sorted({p.serial for p in passages if p.serial is not None})
    rank_of = {serial: n for n, serial in enumerate(serials)}
    never = len(serials)  # never admitted: after everyone who was
    ranks = [never if p.serial is None else rank_of[p.serial] for p in passages]
    by_answer = sorted(range(len(passages)), key=lambda n: passages[n].answered)
    counts = _Counts(never + 1)
    inserted = next_answer = found = pairs = 0
    for n in sorted(range(len(passages)), key=lambda n: passages[n].sent):
        while next_answer < len(by_answer) and passages[by_answer[next_answer]].answered < passages[n].sent:
            counts.add(ranks[by_answer[next_answer]])
            inserted += 1
            next_answer += 1
        pairs += inserted
        if passages[n].serial is not None:
            found += inserted - counts.up_to(ranks[n])
    return found, pairs


def admissions_figures(folder: Path) -> dict:
    """The figures of a run whose buyers passed a waiting room, as ``Result`` names them."""
    passages = passages_read(folder)
    found, pairs = inversions(passages)
    waits = [p.seen - p.answered for p in passages if p.seen is not None]
    return {
        "admitted": sum(1 for p in passages if p.status == "admitted"),
        "told_sold_out": sum(1 for p in passages if p.status == "sold_out"),
        "inversions_percent": 100 * found / pairs if pairs else 0.0,
        "longest_wait_s": max(waits, default=0.0),
    }
