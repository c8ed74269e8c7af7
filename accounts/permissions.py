"""What the admin site asks of a member of staff, asked by the API and the staff pages too."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import Permission
from django.db.models import Q


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


def permissions_named(names: Iterable[str]) -> list[Permission]:
    """The ``Permission`` rows of ``app_label.codename`` names; an unknown name is an error,
    not a permission silently left out."""
    names = set(names)
    wanted = Q(pk__in=[])
    for name in names:
        app_label, _, codename = name.partition(".")
        wanted |= Q(content_type__app_label=app_label, codename=codename)
    found = list(Permission.objects.filter(wanted).select_related("content_type"))
    unknown = names - {f"{p.content_type.app_label}.{p.codename}" for p in found}
    if unknown:
        raise ValueError(f"no such permission: {', '.join(sorted(unknown))}")
    return found
