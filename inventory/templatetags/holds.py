"""A held record on the pages (docs/design.md, "Lifecycle"): a hold window or the time left
in words (``duration``), and a record's fragment rendered in a list from the context the
item core gave it (``fragment``, ``inventory.pages.TakePages.states``)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

register = template.Library()

# The units a length of time is said in, largest first; at most two of them are said.
UNITS = (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1))


@register.filter
def duration(seconds: int | None) -> str:
    """``seconds`` in words, its two largest units: "15 minutes", "1 hour 30 minutes", "1 day".
    Words, never "14:59": on the pages every clock reading is a moment (``core.moments``)."""
    seconds = max(0, int(seconds or 0))
    parts = []
    for name, size in UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {name}{'' if count == 1 else 's'}")
        if len(parts) == 2 or (parts and not count):
            break
    return " ".join(parts) or "0 seconds"


@register.simple_tag(takes_context=True)
def fragment(context, template_name: str, values: dict, **more) -> SafeString:
    """``template_name`` rendered with ``values`` and ``more`` over the page's context, as
    ``{% include %}`` renders with ``with``, which takes no dict."""
    fragment_template = context.template.engine.get_template(template_name)
    with context.push(**values, **more):
        return fragment_template.render(context)
