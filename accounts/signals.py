"""A changed password revokes every bearer token of the user.

Django sends no signal of its own for a password change, and its hooks for one
(``password_validation.password_changed``, the admin's and the views' forms) each see only
some of the ways a password changes. Every way ends in saving the user with a new hash
in ``password``: ``set_password`` and ``save``, the admin's password form, the password
change views, ``set_unusable_password``, ``changepassword``. So the hash about to be saved
is compared with the stored one, and a save that wrote a different one revokes. A save
that names its fields and leaves ``password`` out (``update_last_login`` on every login)
costs nothing. A ``QuerySet.update`` of passwords sends no signal and is not seen here.

Django's own upgrade of a hash to a stronger hasher at login also rewrites the hash: that
revokes the user's tokens once, which only asks API clients to log in again.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver

from .services import user_tokens_revoke


@receiver(pre_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="accounts.password_change_seen")
def password_change_seen(sender, instance, raw=False, update_fields=None, **kwargs):
    instance._password_replaced = False
    if raw or instance._state.adding or instance.pk is None:
        return
    if update_fields is not None and "password" not in update_fields:
        return
    stored = sender._default_manager.filter(pk=instance.pk).values_list("password", flat=True).first()
    instance._password_replaced = stored is not None and stored != instance.password


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="accounts.password_change_revokes_tokens")
def password_change_revokes_tokens(sender, instance, created=False, raw=False, **kwargs):
    if getattr(instance, "_password_replaced", False):
        instance._password_replaced = False
        user_tokens_revoke(user_id=instance.pk)
