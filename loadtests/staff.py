"""The member of staff of a load run: the restock scenario restocks through the staff API."""

from __future__ import annotations

from datetime import timedelta

from accounts.services import users_with_tokens_create

# A restock is a change of the voucher (PATCH /api/admin/vouchers/{id}), and the run's
# member of staff needs nothing more: its token is in a file and in Locust's environment.
PERMISSIONS = ("orders.change_voucher",)


def staff_token_create(*, prefix: str, ttl: timedelta | None = None) -> str:
    """A token of a new member of staff who holds ``PERMISSIONS`` and no other, working for
    ``ttl`` (``API_TOKEN_TTL_SECONDS`` by default)."""
    return users_with_tokens_create(count=1, prefix=prefix, staff=True, permissions=PERMISSIONS, ttl=ttl)[0][1]
