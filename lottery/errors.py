from core.errors import DomainError
from inventory.errors import CrowdOnly, UserLimit


class DrawLimit(UserLimit):
    code = "draw_limit"
    default_message = "You have used all your draws in this pool."


class PoolEmpty(DomainError):
    """Every prize is gone. The draw counts nothing against the user's limit."""

    code = "pool_empty"
    status = 409
    default_message = "Every prize of this pool has been won."


class NotOpen(CrowdOnly):
    code = "not_open"
    default_message = "This pool is a load run's own, not open to draws: only that run's crowd draws in it."
