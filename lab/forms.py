"""The lab's Run form: every choice comes from a registry (products, scenarios, strategies)."""

from __future__ import annotations

from django import forms

from inventory.forms import strategy_choices
from inventory.stock import strategy_names
from loadtests.scenarios import SCENARIOS

from .models import LabRun
from .services import BOUNDS


def _scenario_choices() -> list:
    """Scenarios grouped by product, each with what it proves."""
    return [
        (label, [(s.name, f"{s.name}: {s.proves}") for s in SCENARIOS.values() if s.product == product])
        for product, label in LabRun.Product.choices
    ]


def _bounded_field(name: str, initial: int, label: str, help_text: str) -> forms.IntegerField:
    low, high = BOUNDS[name]
    return forms.IntegerField(
        min_value=low, max_value=high, initial=initial, label=label, help_text=f"{help_text} ({low:,} to {high:,})"
    )


class LabRunForm(forms.Form):
    product = forms.ChoiceField(
        choices=LabRun.Product.choices, initial=LabRun.Product.VOUCHER, widget=forms.RadioSelect
    )
    scenario = forms.ChoiceField(choices=_scenario_choices, initial="crowd")
    strategies = forms.MultipleChoiceField(
        choices=strategy_choices,
        initial=strategy_names,
        widget=forms.CheckboxSelectMultiple,
        help_text="Each runs in turn against fresh data.",
    )
    stock = _bounded_field("stock", 100, "Stock", "units of the voucher, or of the pool over its 5 prizes")
    crowd = _bounded_field("crowd", 2000, "Crowd", "distinct buyers, each trying once (or drawing up to 3 times)")
    users = _bounded_field("users", 40, "Concurrency", "requests in flight at once (Locust users)")
    duration = _bounded_field("duration", 10, "Seconds per strategy", "how long the crowd runs at each strategy")

    @property
    def numbers(self) -> list[forms.BoundField]:
        return [self[name] for name in ("stock", "crowd", "users", "duration")]

    def clean(self):
        cleaned = super().clean()
        scenario, product = cleaned.get("scenario"), cleaned.get("product")
        if scenario and product and SCENARIOS[scenario].product != product:
            other = LabRun.Product(SCENARIOS[scenario].product).label
            self.add_error(
                "scenario", f"{scenario} runs against the {other.lower()}: pick a scenario of the chosen product."
            )
        return cleaned
