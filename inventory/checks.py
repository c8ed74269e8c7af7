from django.conf import settings
from django.core.checks import Error, register

from .items import CLOSING_WITHIN
from .models import Strategy


@register()
def strategy_settings_check(app_configs, **kwargs):
    errors = []
    if settings.DEFAULT_STRATEGY not in Strategy.values:
        errors.append(
            Error(
                f"DEFAULT_STRATEGY is {settings.DEFAULT_STRATEGY!r}.",
                hint=f"Use one of: {', '.join(Strategy.values)}.",
                id="inventory.E001",
            )
        )
    if settings.RESERVATIONS_PERSIST_CONSUMERS < 1:
        errors.append(
            Error(
                f"RESERVATIONS_PERSIST_CONSUMERS is {settings.RESERVATIONS_PERSIST_CONSUMERS}.",
                hint="At least 1 drain must be able to write an item's reservations.",
                id="inventory.E002",
            )
        )
    if settings.RESERVATIONS_CLOSE_AFTER_END_SECONDS < settings.RESERVATIONS_SWEEP_AFTER_END_SECONDS:
        errors.append(
            Error(
                f"RESERVATIONS_CLOSE_AFTER_END_SECONDS ({settings.RESERVATIONS_CLOSE_AFTER_END_SECONDS}) is shorter "
                f"than RESERVATIONS_SWEEP_AFTER_END_SECONDS ({settings.RESERVATIONS_SWEEP_AFTER_END_SECONDS}).",
                hint="A sale's Redis keys are removed after the sweep has stopped looking at them, never before.",
                id="inventory.E003",
            )
        )
    if settings.RESERVATIONS_CLOSE_EVERY_SECONDS >= CLOSING_WITHIN.total_seconds():
        errors.append(
            Error(
                f"RESERVATIONS_CLOSE_EVERY_SECONDS is {settings.RESERVATIONS_CLOSE_EVERY_SECONDS}.",
                hint=f"Under {CLOSING_WITHIN.total_seconds():.0f}: the close reads the sales that ended within that "
                "before its cutoff, and one run every that long or more would pass some over.",
                id="inventory.E004",
            )
        )
    return errors
