"""Helpers the products' APIs share."""

from __future__ import annotations

import json

from ninja.errors import HttpError

FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


def refuse_body(request, *, action: str) -> None:
    """An action that takes no input accepts no body, an empty form, or ``{}``; anything
    else is refused whole (400), so a client that thinks it is sending a choice learns
    it is not."""
    if not request.body.strip():
        return
    if request.content_type in FORM_TYPES and not request.POST and not request.FILES:
        return
    try:
        body = json.loads(request.body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise HttpError(400, "Cannot parse request body: send no body or {}.") from None
    if body != {}:
        raise HttpError(400, f"A {action} takes no input: the caller is the authenticated user.")
