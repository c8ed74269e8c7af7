"""The lab's Run form: every choice comes from a registry (products, scenarios, strategies)."""

from __future__ import annotations

from django import forms

from inventory.forms import strategy_choices
from inventory.strategies import strategy_names
from loadtests.scenarios import ALL

from .models import LabRun
from .services import BOUNDS, DEFAULTS


def _scenario_choices() -> list:
    """Scenarios grouped by product, each with what it proves: the crowds first, then the
    lifecycle's (``loadtests.scenarios.LIFECYCLE``)."""
    return [
        (label, [(s.name, f"{s.name}: {s.proves}") for s in ALL.values() if s.product == product])
        for product, label in LabRun.Product.choices
    ]


def _bounded_field(name: str, label: str, help_text: str) -> forms.IntegerField:
    low, high = BOUNDS[name]
    return forms.IntegerField(
        min_value=low,
        max_value=high,
        initial=DEFAULTS[name],
        label=label,
        help_text=f"{help_text} ({low:,} to {high:,})",
    )


def scenarios_by_product() -> dict[str, list[str]]:
    """Each product's scenarios in the registry's order, its crowd first: what the form
    offers once that product is chosen, and falls back to."""
    return {product: [s.name for s in ALL.values() if s.product == product] for product in LabRun.Product.values}


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
    stock = _bounded_field("stock", "Stock", "units of the voucher, or of the pool over its 5 prizes")
    crowd = _bounded_field("crowd", "Crowd", "distinct buyers, each trying once (or drawing up to 3 times)")
    users = _bounded_field("users", "Concurrency", "requests in flight at once (Locust users)")
    duration = _bounded_field("duration", "Seconds per strategy", "how long the crowd runs at each strategy")

    @property
    def numbers(self) -> list[forms.BoundField]:
        return [self[name] for name in ("stock", "crowd", "users", "duration")]

    def clean(self):
        cleaned = super().clean()
        scenario, product = cleaned.get("scenario"), cleaned.get("product")
        if scenario and product and ALL[scenario].product != product:
            other = LabRun.Product(ALL[scenario].product).label
            self.add_error(
                "scenario", f"{scenario} runs against the {other.lower()}: pick a scenario of the chosen product."
            )
        return cleaned
