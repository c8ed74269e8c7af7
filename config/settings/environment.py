"""Reading the settings' environment variables: an unset or empty variable is the default,
and a value that cannot be read stops the start, naming the variable."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {value!r}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_rate(name: str, default: float) -> float:
    """A probability, 0 to 1 (``0.25``)."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        rate = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number from 0 to 1, got {value!r}") from None
    if not 0 <= rate <= 1:
        raise ImproperlyConfigured(f"{name} must be a number from 0 to 1, got {value!r}")
    return rate
