"""Who may call a page view."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied


def staff_required(view):
    """Anonymous visitors are sent to log in; a logged-in user who is not staff gets 403,
    since logging in again as the same user would only come back here."""

    @wraps(view)
    @login_required
    def staff_only(request, *args, **kwargs):
        if not request.user.is_staff:
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return staff_only
