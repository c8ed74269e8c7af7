"""The authentication backend of every login (the API's, the login page's, the admin's):
Django's own, behind the login throttle, with the upgrade of an outdated hash made a
compare-and-set (``hash_upgraded``)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.hashers import check_password
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
            return None if username is None else self._password_checked(username, password)
        address, account = client_counted(request), login_account(username)  # once: a query, two for a name no user has
        try:
            login_throttle_check(account=account, address=address)
        except RateLimited as refused:
            request.login_throttled = refused
            raise PermissionDenied from refused
        user = self._password_checked(username, password)
        if user is None:
            login_failure_record(account=account, address=address)
        else:
            login_success_record(account=account, address=address)
        return user

    def _password_checked(self, username: str, password: str | None):
        """``ModelBackend.authenticate`` once the throttle let the login through: the user
        whose password ``password`` is and who may log in, else None, an unknown username
        costing a hash all the same; but an outdated hash upgraded by ``hash_upgraded``."""
        if password is None:
            return None
        users = get_user_model()
        try:
            user = users._default_manager.get_by_natural_key(username)
        except users.DoesNotExist:
            users().set_password(password)
            return None
        checked = check_password(password, user.password, setter=lambda raw: hash_upgraded(user, raw))
        return user if checked and self.user_can_authenticate(user) else None


def hash_upgraded(user, raw_password: str) -> None:
    """Rewrite ``user``'s hash, found outdated at a login, with the hasher of today (Django's
    setter does it with a ``save``): only where the database still holds the hash just
    checked, as an update, which sends no ``pre_save``. The same password, so no revocation
    of the user's tokens (``accounts.signals``); and two logins upgrading it at once, each
    with a salt of its own, no longer overwrite each other, which left one's login holding a
    hash the database no longer had (``LoginOutdated``, and its token revoked by the other's
    save). Where another login wrote first, ``user`` takes the hash stored, if it is of this
    password; if not, the password changed meanwhile, and ``user`` keeps the hash of the old
    one, which the issue of a token then refuses."""
    checked, manager = user.password, type(user)._default_manager
    user.set_password(raw_password)
    user._password = None
    if manager.filter(pk=user.pk, password=checked).update(password=user.password):
        return
    stored = manager.filter(pk=user.pk).values_list("password", flat=True).first()
    if stored is not None and check_password(raw_password, stored):
        user.password = stored
