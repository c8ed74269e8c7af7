"""The staff form that switches a voucher's or pool's strategy."""

from __future__ import annotations

from django import forms

from .strategies import STRATEGIES
from .templatetags.strategies import unsafe_label
from .texts import described


def strategy_choices() -> list[tuple[str, str]]:
    """Every strategy of the registry, in its order, each labelled with its explanation."""
    choices = []
    for name in STRATEGIES:
        strategy = described(name)
        unsafe = unsafe_label(strategy.breaks)
        choices.append((name, f"{name}{f' ({unsafe})' if unsafe else ''}: {strategy.explanation}"))
    return choices


class StrategyForm(forms.Form):
    # Choices read when the form is made, not at import, so the registry alone decides them.
    strategy = forms.ChoiceField(choices=strategy_choices)
