"""``{{ moment|moment }}``: a moment as every page writes it (``core.moments``), in a
``<time>`` element whose ``datetime`` is the instant in ISO 8601 for machines and tests."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils.html import format_html

from core.moments import moment_text

register = template.Library()


@register.filter
def moment(value: datetime | None) -> str:
    if value is None:
        return ""
    return format_html('<time datetime="{}">{}</time>', value.isoformat(), moment_text(value))
