"""Every sequence of a voucher's and a prize pool's life, on every guarded strategy: the
state machines of ``tests/model/`` run by Hypothesis against the real services.

``make test`` runs the ``ci`` profile (a few dozen runs per strategy, about two minutes in
all); ``make explore`` runs the ``explore`` profile for as long as asked
(``scripts/explore.py``). A failure prints the shrunk story of rules that broke it; each
one found is kept as a plain test in ``tests/model/test_stories.py``.
"""

from __future__ import annotations

import json
import os

import pytest
from django.utils import timezone
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from inventory.admission import room
from inventory.strategies import STRATEGIES, strategy_names

from .machine import RULES_RUN, Clock, ItemMachine
from .pool_machine import PoolMachine
from .voucher_machine import VoucherMachine

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reservations_redis", "idempotency_keys", "payment_provider", "redlock_urls"),
    pytest.mark.model,
]

GUARDED = [name for name in strategy_names() if STRATEGIES[name].guarded]


def machine_for(product: type[ItemMachine], strategy: str, clock: Clock) -> type[ItemMachine]:
    """The machine of an item sold under ``strategy``, which a run may switch to any other
    guarded strategy while units are held."""
    return type(
        f"{product.__name__}_{strategy}",
        (product,),
        {"strategy": strategy, "switches": tuple(name for name in GUARDED if name != strategy), "clock": clock},
    )


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """``timezone.now()`` and the waiting room's moment (``room_now``) as the machine's clock."""
    clock = Clock()
    monkeypatch.setattr(timezone, "now", clock)
    monkeypatch.setattr(room, "room_now", clock)
    return clock


@pytest.fixture
def rules_counted(request):
    """What ran, appended as a JSON line to ``MODEL_COUNTS`` when set (``make explore``)."""
    RULES_RUN.clear()
    yield
    if path := os.environ.get("MODEL_COUNTS"):
        with open(path, "a") as counts:
            counts.write(json.dumps({"test": request.node.name, "rules": dict(RULES_RUN)}) + "\n")


@pytest.mark.parametrize("strategy", GUARDED)
@pytest.mark.usefixtures("rules_counted")
def test_every_sequence_of_a_voucher(strategy, clock):
    run_state_machine_as_test(machine_for(VoucherMachine, strategy, clock), settings=settings())


@pytest.mark.parametrize("strategy", GUARDED)
@pytest.mark.usefixtures("rules_counted")
def test_every_sequence_of_a_prize_pool(strategy, clock):
    run_state_machine_as_test(machine_for(PoolMachine, strategy, clock), settings=settings())
