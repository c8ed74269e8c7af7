"""Every registered strategy has its page texts (``inventory.texts``): a strategy added to
the registry without them fails here, not on a page that shows it blank."""

from __future__ import annotations

from inventory.strategies import STRATEGIES
from inventory.texts import TEXTS, described


def test_every_registered_strategy_has_its_texts_and_no_text_names_an_unknown_one():
    assert set(TEXTS) == set(STRATEGIES)
    for name in STRATEGIES:
        assert TEXTS[name].explanation, name  # the lists, the item pages, the staff form, the lanes
        assert TEXTS[name].why, name  # the proof page explains every one


def test_a_strategy_as_the_pages_show_it_carries_its_flags_and_its_texts():
    for name, strategy in STRATEGIES.items():
        shown = described(name)
        assert (shown.name, shown.breaks, shown.deferred) == (name, strategy.breaks, strategy.deferred)
        assert (shown.explanation, shown.why) == (TEXTS[name].explanation, TEXTS[name].why)
    assert described("carrier_pigeon") is None  # a strategy since removed
