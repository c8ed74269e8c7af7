"""The ``Idempotency-Key`` a page's button sends with its post (``core.idempotency``), as the
API's clients send theirs: a new one each time the button is rendered, so that a post sent
twice (a double submit, a retry of a request whose answer was lost) is answered again
rather than done twice, and a press of the button rendered anew is a new request."""

from __future__ import annotations

import json
import secrets

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.idempotency import HEADER

from ..admission.tickets import HEADER as TICKET_HEADER

register = template.Library()


@register.simple_tag
def idempotency_key(ticket: str | None = None) -> SafeString:
    """The button's ``hx-headers`` attribute with a fresh key, and the waiting room's
    ``ticket`` when the buyer was admitted with one (``inventory.admission``); htmx merges it
    with the headers the page's body sends (the CSRF token)."""
    headers = {HEADER: secrets.token_urlsafe(16)}
    if ticket:
        headers[TICKET_HEADER] = ticket
    return format_html("hx-headers='{}'", json.dumps(headers))
