"""The lab's Run form: every choice comes from a registry (products, scenarios, strategies)."""

from __future__ import annotations

from django import forms

from inventory.forms import strategy_choices
from inventory.strategies import strategy_names
from loadtests.scenarios import ALL

from .models import LabRun
from .services import BOUNDS, DEFAULTS

BUCKETS_OUT_OF_RANGE = (
    f"Buckets must be a whole number from {BOUNDS['buckets'][0]} (one row) to {BOUNDS['buckets'][1]}."
)


def _scenario_choices() -> list:
    """Scenarios grouped by product, by name: the crowds first, then the lifecycle's
    (``loadtests.scenarios.LIFECYCLE``). What each proves is written beside the list
    (``scenarios_explained``): in an option it ran past a phone's select and was cut off."""
    return [
        (label, [(s.name, s.name) for s in ALL.values() if s.product == product])
        for product, label in LabRun.Product.choices
    ]


def scenarios_explained() -> list[dict[str, str]]:
    """Each scenario with its product and what it proves, in the registry's order."""
    return [{"name": s.name, "product": s.product, "proves": s.proves} for s in ALL.values()]


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
    buckets = forms.IntegerField(
        min_value=BOUNDS["buckets"][0],
        max_value=BOUNDS["buckets"][1],
        initial=1,
        # A form posted without it (a page of an earlier version) runs on one row.
        required=False,
        label="Buckets",
        help_text=(
            f"1: one row; {BOUNDS['buckets'][0] + 1} to {BOUNDS['buckets'][1]}: each strategy on one row, then on "
            "that many buckets, side by side (vouchers only)"
        ),
        error_messages={
            "min_value": BUCKETS_OUT_OF_RANGE,
            "max_value": BUCKETS_OUT_OF_RANGE,
            "invalid": BUCKETS_OUT_OF_RANGE,
        },
    )

    @property
    def numbers(self) -> list[forms.BoundField]:
        return [self[name] for name in ("stock", "crowd", "users", "duration", "buckets")]

    def clean_buckets(self) -> int:
        return self.cleaned_data.get("buckets") or 1

    def clean(self):
        cleaned = super().clean()
        scenario, product = cleaned.get("scenario"), cleaned.get("product")
        if scenario and product and ALL[scenario].product != product:
            other = LabRun.Product(ALL[scenario].product).label
            self.add_error(
                "scenario", f"{scenario} runs against the {other.lower()}: pick a scenario of the chosen product."
            )
        return cleaned
