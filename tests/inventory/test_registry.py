"""The registry and the one list of strategy names agree, and the models take their
choices from that list through a callable, so that adding a strategy needs no migration."""

from __future__ import annotations

import pytest

from inventory.models import Strategy, strategy_choices
from inventory.strategies import STRATEGIES
from lottery.models import Pool
from orders.models import Voucher


def test_the_registry_names_the_strategies_of_the_names_list_in_its_order():
    assert list(STRATEGIES) == Strategy.values
    assert all(STRATEGIES[name].name == name for name in STRATEGIES)


@pytest.mark.parametrize("model", [Voucher, Pool])
def test_a_strategy_field_takes_its_choices_from_the_callable_not_a_copied_list(model):
    field = model._meta.get_field("strategy")
    assert list(field.choices) == Strategy.choices
    # What a migration records: the callable's path, not the values.
    assert field.deconstruct()[3]["choices"] is strategy_choices
