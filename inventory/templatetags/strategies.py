"""A voucher's or pool's strategy as the pages show it, read from the registry
(``inventory.strategies.STRATEGIES``) and its page texts (``inventory.texts``), so that a
strategy added there appears on every page with no template change."""

from __future__ import annotations

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from inventory.texts import described

register = template.Library()

# How each way of breaking reads on a page; one added later reads as plain "unsafe".
UNSAFE_LABELS = {"always": "unsafe", "across_processes": "unsafe across processes"}


@register.filter
def unsafe_label(breaks: str | None) -> str:
    """How a strategy that ``breaks`` this way is marked; "" for a safe one."""
    return UNSAFE_LABELS.get(breaks, "unsafe") if breaks else ""


@register.inclusion_tag("inventory/_strategy.html")
def strategy_line(name: str) -> dict:
    """The strategy's name, an "unsafe" mark for those expected to break, and its one-line explanation."""
    strategy = described(name)
    return {
        "name": name,
        # A narrow table cell breaks "db_optimistic" after its underscore, not mid-word
        # (safe: the name is escaped before the tag goes in).
        "name_html": mark_safe(escape(name).replace("_", "_<wbr>")),
        "unsafe": unsafe_label(strategy.breaks if strategy else None),
        "breaks": strategy.breaks if strategy else None,
        "explanation": strategy.explanation if strategy else "",
    }
