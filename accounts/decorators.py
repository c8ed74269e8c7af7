"""Who may call a page view."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

from .permissions import staff_holds


def staff_permission_required(*permissions: str):
    """Anonymous visitors are sent to log in; a logged-in user who is not an active member
    of staff holding one of ``permissions`` (as the admin site would ask) gets 403, since
    logging in again as the same user would only come back here."""

    def decorator(view):
        @wraps(view)
        @login_required
        def permitted_only(request, *args, **kwargs):
            if not staff_holds(request.user, *permissions):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return permitted_only

    return decorator
