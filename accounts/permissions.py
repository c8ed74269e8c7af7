"""What the admin site asks of a member of staff, asked by the API and the staff pages too."""

from __future__ import annotations


def staff_holds(user, *permissions: str) -> bool:
    """Whether ``user`` is an active member of staff holding one of ``permissions``
    (``app_label.codename``; a superuser holds every one).

    Being staff only lets a user into the admin site; each change there needs its model
    permission. Several names mean any one of them: the admin lets the change permission
    stand for view, so a read names both.
    """
    if not permissions:
        raise ValueError("name the permission that the call needs")
    return bool(
        user.is_authenticated
        and user.is_active
        and user.is_staff
        and any(user.has_perm(permission) for permission in permissions)
    )
