from core.errors import DomainError


class DrawLimit(DomainError):
    code = "draw_limit"
    status = 409
    default_message = "You have used all your draws in this pool."


class PoolEmpty(DomainError):
    """Every prize is gone. The draw counts nothing against the user's limit."""

    code = "pool_empty"
    status = 409
    default_message = "Every prize of this pool has been won."
