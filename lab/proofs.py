"""Which proof on ``/proof/`` a finished run can stand for, as a key fixed when it finishes
(``LabRun.proves``): the page then reads the latest run of a key on one index, however many
runs that prove nothing (a short run, a strategy not run to its end) came after it.

A run stands for one proof at most: split into buckets, the product's bucketed proof; a surge
(``loadtests.scenarios.SURGES``), that surge's; any other scenario, the proof of its product
and kind (the crowd's, or the lifecycle's), at its size and with its strategies in their
order, which the page asks for at the default size and with the registry's strategies. A key
is written only where every lane ran to its end and every unsafe one reproduced the race, so
one that names the registry of its day stops being read the day a strategy joins it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from loadtests.scenarios import ALL, SURGES

from .models import LabLane, LabRun


def proof_of_buckets(product: str) -> str:
    return f"{product}/buckets"


def proof_of_surge(scenario: str) -> str:
    return f"surge/{scenario}"


def proof_of_strategies(
    *, product: str, lifecycle: bool, strategies: Iterable[str], stock: int, crowd: int, users: int, duration: int
) -> str:
    """A run of ``strategies`` in this order, at this size: their names as a digest, so the key
    stays a short indexed column however many strategies the registry grows to."""
    kind = "lifecycle" if lifecycle else "crowd"
    names = hashlib.blake2b(",".join(strategies).encode(), digest_size=8).hexdigest()
    return f"{product}/{kind}/{stock}x{crowd}x{users}x{duration}/{names}"


def run_proves(run: LabRun) -> str:
    """The key of the proof ``run`` can stand for, "" where it stands for none: a lane not run
    to its end, a strategy expected to break that did not (the race not reproduced, a run
    that demonstrates nothing), or a scenario since removed. A safe lane's failed verdict
    does not stop it: the page shows what broke."""
    lanes = list(run.lanes.order_by("position").values_list("strategy", "status", "expected_to_break", "ok"))
    scenario = ALL.get(run.scenario)
    if (
        not lanes
        or scenario is None
        or any(status != LabLane.Status.DONE or (unsafe and not ok) for _, status, unsafe, ok in lanes)
    ):
        return ""
    if run.buckets > 1:
        return proof_of_buckets(run.product)
    if run.scenario in SURGES:
        return proof_of_surge(run.scenario)
    return proof_of_strategies(
        product=run.product, lifecycle=scenario.lifecycle, strategies=[strategy for strategy, *_ in lanes],
        stock=run.stock, crowd=run.crowd, users=run.users, duration=run.duration,
    )  # fmt: skip
