"""The admin restock form's one-time field, as its page renders one."""

from __future__ import annotations

import secrets


def fresh_once() -> str:
    return secrets.token_urlsafe(16)
