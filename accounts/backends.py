"""The authentication backend of every login (the API's, the login page's, the admin's):
Django's own, behind the login throttle."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

from core.ratelimit import RateLimited, client_counted

from .throttle import login_account, login_failure_record, login_success_record, login_throttle_check


class ThrottledModelBackend(ModelBackend):
    """``ModelBackend`` that refuses, before hashing anything, an account backed off from
    this address, or an account or address over its ceiling (``accounts.throttle``), and
    counts every failure.

    A refusal raises ``PermissionDenied``, which ends Django's ``authenticate()`` with no
    user (the admin and the login page say the login failed); the refusal itself is left
    on the request as ``login_throttled`` for a caller that answers 429 with its
    ``Retry-After``.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if request is None or username is None:
            return super().authenticate(request, username=username, password=password, **kwargs)
        address, account = client_counted(request), login_account(username)  # one query, once
        try:
            login_throttle_check(account=account, address=address)
        except RateLimited as refused:
            request.login_throttled = refused
            raise PermissionDenied from refused
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            login_failure_record(account=account, address=address)
        else:
            login_success_record(account=account, address=address)
        return user
